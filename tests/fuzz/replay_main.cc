// The main of fuzz targets in ordinary builds (tools/bazel/fuzz.bzl): runs
// every file named on the command line, or found under a directory named
// there, through LLVMFuzzerTestOneInput once. Arguments starting with '-'
// (libFuzzer's flags) are ignored, so one argument list serves both mains.
// Prints the number of inputs run; fails if there were none (a corpus
// that went missing must not pass silently).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv)
    __attribute__((weak));

namespace {

std::vector<std::string> InputsUnder(const std::string& arg) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  if (fs::is_directory(arg)) {
    for (const auto& entry : fs::recursive_directory_iterator(
             arg, fs::directory_options::follow_directory_symlink)) {
      if (!entry.is_directory()) files.push_back(entry.path().string());
    }
  } else {
    files.push_back(arg);
  }
  return files;
}

bool RunOne(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  int ran = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') continue;
    for (const std::string& file : InputsUnder(arg)) {
      if (!RunOne(file)) return 1;
      ++ran;
    }
  }
  std::printf("replay: %d inputs ran without a crash\n", ran);
  return ran > 0 ? 0 : 1;
}

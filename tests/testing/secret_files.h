// Secret files (tokens, keys) must be private (rpc/auth/security.h refuses
// others): tests copy the checked-in ones to private files first.
#ifndef FERRY_TESTS_TESTING_SECRET_FILES_H_
#define FERRY_TESTS_TESTING_SECRET_FILES_H_

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ferry {
namespace testing {

// A copy of `path` in TEST_TMPDIR readable by its owner only.
inline std::string PrivateCopy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string copy = std::string(std::getenv("TEST_TMPDIR")) + "/private-" +
                     path.substr(path.rfind('/') + 1);
  std::ofstream(copy, std::ios::binary | std::ios::trunc) << bytes.str();
  chmod(copy.c_str(), 0600);
  return copy;
}

// Writes `text` to a private file in TEST_TMPDIR named `name`.
inline std::string PrivateFile(const std::string& name,
                               const std::string& text) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), 0600);
  return path;
}

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_SECRET_FILES_H_

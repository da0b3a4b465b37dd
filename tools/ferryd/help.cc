#include "tools/ferryd/help.h"

#include <algorithm>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace ferry {

namespace {

constexpr size_t kWidth = 78;
constexpr absl::string_view kIndent = "      ";

// `text` as lines of at most kWidth columns, each after kIndent.
void Wrapped(std::ostream& out, absl::string_view text) {
  size_t column = 0;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > 0 && column + 1 + word.size() > kWidth) {
      out << "\n";
      column = 0;
    }
    if (column == 0) {
      out << kIndent;
      column = kIndent.size();
    } else {
      out << ' ';
      ++column;
    }
    out << word;
    column += word.size();
  }
  if (column > 0) out << "\n";
}

std::vector<absl::CommandLineFlag*> FlagsOf(absl::string_view file) {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), file)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](absl::CommandLineFlag* a, absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  return flags;
}

}  // namespace

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-help" || arg == "-h" ||
        arg == "--helpfull" || arg == "--helpshort") {
      return true;
    }
  }
  return false;
}

void PrintHelp(std::ostream& out, absl::string_view usage,
               const std::vector<HelpSection>& sections) {
  out << usage << "\n";
  for (const HelpSection& section : sections) {
    out << "\n" << section.title << ":\n";
    for (absl::CommandLineFlag* flag : FlagsOf(section.file)) {
      std::string fallback = flag->DefaultValue();
      out << "  --" << flag->Name();
      if (!fallback.empty()) out << " (default: " << fallback << ")";
      out << "\n";
      Wrapped(out, flag->Help());
    }
  }
}

}  // namespace ferry

// A TestNetwork (netns.h) driven over stdin, for tests that are not C++
// (the Python failure matrix): one command per line, one answer line each.
//
//   create HOST...   the network; answers {"HOST": {"netns": …,
//                    "address": …}, …} (JSON), or "error: …"
//   partition HOST   HOST's link down at the bridge; "ok" or "error: …"
//   heal HOST        its link back up; "ok" or "error: …"
//
// At end of input (the test closed the pipe, or died) the network is
// destroyed, every process in it killed; a network left by a SIGKILLed
// tool is stale and removed by the next Create anywhere.
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/netns.h"

namespace {

using ::ferry::testing::NetHost;
using ::ferry::testing::TestNetwork;

std::string Json(const std::vector<NetHost>& hosts) {
  // Names, namespaces and addresses are [a-z0-9.-]: nothing to escape.
  std::vector<std::string> parts;
  for (const NetHost& h : hosts) {
    parts.push_back(absl::StrCat("\"", h.name, "\": {\"netns\": \"", h.netns,
                                 "\", \"address\": \"", h.address, "\"}"));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
}

std::string Answer(const absl::Status& s) {
  return s.ok() ? "ok" : absl::StrCat("error: ", s.ToString());
}

}  // namespace

int main() {
  std::unique_ptr<TestNetwork> net;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    std::vector<std::string> args;
    for (std::string w; words >> w;) args.push_back(w);
    std::string answer;
    if (command == "create" && net == nullptr && !args.empty()) {
      absl::Status available = TestNetwork::Available();
      absl::StatusOr<std::unique_ptr<TestNetwork>> made =
          available.ok()
              ? TestNetwork::Create(args)
              : absl::StatusOr<std::unique_ptr<TestNetwork>>(available);
      if (made.ok()) {
        net = *std::move(made);
        answer = Json(net->hosts());
      } else {
        answer = Answer(made.status());
      }
    } else if ((command == "partition" || command == "heal") &&
               net != nullptr && args.size() == 1) {
      answer = Answer(command == "partition" ? net->Partition(args[0])
                                             : net->Heal(args[0]));
    } else {
      answer = absl::StrCat("error: unknown or misplaced command: ", line);
    }
    std::cout << answer << std::endl;
  }
  return 0;  // ~TestNetwork destroys it.
}

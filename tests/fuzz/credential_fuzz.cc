// Fuzz target: the credential header every call presents
// ("ferry-credential", rpc/auth/credential.h), as the Authenticator reads
// it (Authenticator::NodeOfHeader: the whole-header match of a known
// sender, then the parse, then the tables), on a worker (node 3) that
// knows workers 7 and 9 and has seen worker 11 leave.
//
// Input: its first byte picks the header:
//   0 the rest of the input, as it is;
//   1 a known node's exact header (the next byte picks 7, 9 or 11), then
//     overwritten at positions the rest names: (position byte, value
//     byte) pairs;
//   2 a known node's header (as above) with the bytes from one position
//     (a byte) to another (a byte) replaced by the rest of the input:
//     cut, extended, zero-padded.
// Properties: no crash; the answer is a node or UNAUTHENTICATED; a node
// only for a header that is that node's exactly or that parses to its id
// and its token (a zero-padded id, say), never for 11; a known header
// names its node; ParseCredential's answer survives FormatCredential.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"

namespace ferry {
namespace {

constexpr uint64_t kNodes[] = {7, 9, 11};

struct Fixture {
  Fixture() {
    for (int i = 0; i < 3; ++i) {
      std::shared_ptr<const NodeKey> key = NodeKey::Generate();
      credential[i].node = kNodes[i];
      credential[i].token = CallToken(*key->Agree(self.key().public_key()),
                                      {kNodes[i], key->public_key()},
                                      {self.self(), self.key().public_key()});
      header[i] = FormatCredential(credential[i]);
      self.Admit(kNodes[i], key->public_key());
    }
    self.Forget(11);
    self.SetLearned();
  }
  Authenticator self{AuthenticatorOptions{.self = 3}};
  PresentedCredential credential[3];
  std::string header[3];
};

std::string HeaderFrom(const Fixture& f, const uint8_t* data, size_t size) {
  if (size == 0) return "";
  const uint8_t mode = data[0] % 3;
  if (mode == 0)
    return std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  if (size < 2) return "";
  std::string header = f.header[data[1] % 3];
  if (mode == 1) {
    for (size_t i = 2; i + 1 < size; i += 2) {
      header[data[i] % header.size()] = static_cast<char>(data[i + 1]);
    }
    return header;
  }
  if (size < 4) return header;
  const size_t from = std::min<size_t>(data[2], header.size());
  const size_t to = std::clamp<size_t>(data[3], from, header.size());
  return header.replace(from, to - from,
                        reinterpret_cast<const char*>(data + 4), size - 4);
}

bool Same(const PresentedCredential& a, const PresentedCredential& b) {
  return a.node == b.node && a.token == b.token &&
         a.public_key == b.public_key && a.voucher == b.voucher;
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ferry::Fixture;
  static const Fixture* const fixture = new Fixture();
  const std::string header = ferry::HeaderFrom(*fixture, data, size);

  const std::optional<ferry::PresentedCredential> parsed =
      ferry::ParseCredential(header);
  if (parsed.has_value()) {
    std::optional<ferry::PresentedCredential> again =
        ferry::ParseCredential(ferry::FormatCredential(*parsed));
    if (!again.has_value() || !ferry::Same(*again, *parsed)) std::abort();
  }

  absl::StatusOr<std::optional<uint64_t>> node =
      fixture->self.NodeOfHeader(header);
  if (!node.ok()) {
    if (!absl::IsUnauthenticated(node.status())) std::abort();
    for (int i = 0; i < 2; ++i) {
      if (header == fixture->header[i]) std::abort();  // A known sender.
    }
    return 0;
  }
  // A joined worker of a job that checks credentials believes no claim.
  if (!node->has_value()) std::abort();
  int i = 0;
  while (i < 2 && ferry::kNodes[i] != **node) ++i;
  if (i == 2) std::abort();  // Not a live node of this job.
  if (header != fixture->header[i] &&
      (!parsed.has_value() || parsed->node != **node ||
       parsed->token != fixture->credential[i].token)) {
    std::abort();
  }
  return 0;
}

#include "tests/testing/stalled_http2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace testing {

namespace {

// HTTP/2 (RFC 9113) frame types and flags used here.
constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3,
                  kSettings = 0x4, kPing = 0x6, kGoaway = 0x7;
constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::string Frame(uint8_t type, uint8_t flags, uint32_t stream,
                  const std::string& payload) {
  std::string f;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f.push_back(static_cast<char>(n >> 16));
  f.push_back(static_cast<char>(n >> 8));
  f.push_back(static_cast<char>(n));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8) {
    f.push_back(
        static_cast<char>((stream >> shift) & (shift == 24 ? 0x7f : 0xff)));
  }
  return f + payload;
}

// An HPACK integer (RFC 7541 5.1) with an `n`-bit prefix under `first`.
std::string HpackInt(uint8_t first, int n, uint64_t v) {
  const uint64_t max = (uint64_t{1} << n) - 1;
  std::string out;
  if (v < max) {
    out.push_back(static_cast<char>(first | v));
    return out;
  }
  out.push_back(static_cast<char>(first | max));
  v -= max;
  while (v >= 128) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string HpackString(const std::string& s) {
  return HpackInt(0x00, 7, s.size()) + s;  // Not Huffman-coded.
}

// A literal field without indexing: by a static table name index, or with
// the name given.
std::string Literal(int name_index, const std::string& value) {
  return HpackInt(0x00, 4, name_index) + HpackString(value);
}
std::string Literal(const std::string& name, const std::string& value) {
  return std::string(1, '\0') + HpackString(name) + HpackString(value);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StalledHttp2Client>> StalledHttp2Client::Connect(
    const std::string& address, Metadata metadata) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &to.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not IPv4: ", address));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", address, ": ", why));
  }
  std::unique_ptr<StalledHttp2Client> client(
      new StalledHttp2Client(fd, address, std::move(metadata)));
  // No push; every stream's window 0, never raised.
  std::string settings;
  for (auto [id, value] : {std::pair<uint16_t, uint32_t>{0x2, 0},
                           std::pair<uint16_t, uint32_t>{0x4, 0}}) {
    settings.push_back(static_cast<char>(id >> 8));
    settings.push_back(static_cast<char>(id));
    for (int shift = 24; shift >= 0; shift -= 8) {
      settings.push_back(static_cast<char>(value >> shift));
    }
  }
  if (!client->Send(std::string(kPreface) + Frame(kSettings, 0, 0, settings))) {
    return absl::UnavailableError("the server closed the connection");
  }
  return client;
}

StalledHttp2Client::StalledHttp2Client(int fd, std::string authority,
                                       Metadata metadata)
    : fd_(fd),
      authority_(std::move(authority)),
      metadata_(std::move(metadata)),
      reader_([this] { ReadLoop(); }) {}

StalledHttp2Client::~StalledHttp2Client() {
  ::shutdown(fd_, SHUT_RDWR);  // Ends the read loop.
  reader_.join();
  ::close(fd_);
}

bool StalledHttp2Client::Send(const std::string& bytes) {
  absl::MutexLock lock(&write_mu_);
  return WriteLocked(bytes);
}

bool StalledHttp2Client::WriteLocked(const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n =
        ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

absl::Status StalledHttp2Client::Call(const std::string& method,
                                      const std::string& request) {
  if (request.size() + 5 > 16384) {
    return absl::InvalidArgumentError("a request of at most 16 KiB");
  }
  // Static table (RFC 7541 A): 3 = :method POST, 6 = :scheme http,
  // 4 = :path, 1 = :authority, 31 = content-type.
  std::string block = "\x83\x86";
  block += Literal(4, method) + Literal(1, authority_) +
           Literal(31, "application/grpc") + Literal("te", "trailers");
  for (const auto& [name, value] : metadata_) block += Literal(name, value);
  std::string message(1, '\0');  // Not compressed; then the length.
  const uint32_t n = static_cast<uint32_t>(request.size());
  for (int shift = 24; shift >= 0; shift -= 8) {
    message.push_back(static_cast<char>(n >> shift));
  }
  message += request;
  {
    // Streams open in the order of their ids.
    absl::MutexLock lock(&write_mu_);
    const uint32_t stream = next_stream_;
    next_stream_ += 2;
    if (!WriteLocked(Frame(kHeaders, kEndHeaders, stream, block) +
                     Frame(kData, kEndStream, stream, message))) {
      return absl::UnavailableError("the server closed the connection");
    }
  }
  absl::MutexLock lock(&mu_);
  ++started_;
  return absl::OkStatus();
}

void StalledHttp2Client::ReadLoop() {
  std::string in;
  char buf[16384];
  while (true) {
    const ssize_t got = ::recv(fd_, buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    in.append(buf, static_cast<size_t>(got));
    while (in.size() >= 9) {
      const auto byte = [&](size_t i) { return static_cast<uint8_t>(in[i]); };
      const size_t length =
          (size_t{byte(0)} << 16) | (size_t{byte(1)} << 8) | size_t{byte(2)};
      if (in.size() < 9 + length) break;
      const uint8_t type = byte(3), flags = byte(4);
      const uint32_t stream = ((uint32_t{byte(5)} & 0x7f) << 24) |
                              (uint32_t{byte(6)} << 16) |
                              (uint32_t{byte(7)} << 8) | uint32_t{byte(8)};
      const std::string payload = in.substr(9, length);
      in.erase(0, 9 + length);
      if (type == kSettings && !(flags & kAck)) {
        Send(Frame(kSettings, kAck, 0, ""));
      } else if (type == kPing && !(flags & kAck)) {
        Send(Frame(kPing, kAck, 0, payload));
      } else {
        absl::MutexLock lock(&mu_);
        if (type == kHeaders && answered_.insert(stream).second) {
          ++answered_count_;
        }
        if ((type == kHeaders || type == kData) && (flags & kEndStream)) {
          ++ended_;
        }
        if (type == kRstStream) ++resets_;
        if (type == kData) data_bytes_ += static_cast<int64_t>(length);
        if (type == kGoaway) closed_ = true;
      }
    }
  }
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

int StalledHttp2Client::started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}
int StalledHttp2Client::answered() const {
  absl::MutexLock lock(&mu_);
  return answered_count_;
}
int StalledHttp2Client::ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}
int StalledHttp2Client::resets() const {
  absl::MutexLock lock(&mu_);
  return resets_;
}
int64_t StalledHttp2Client::data_bytes() const {
  absl::MutexLock lock(&mu_);
  return data_bytes_;
}
bool StalledHttp2Client::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

bool StalledHttp2Client::AwaitCount(const int* count, int n,
                                    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [count, n]() { return *count >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}
bool StalledHttp2Client::AwaitAnswered(int n, absl::Duration timeout) {
  return AwaitCount(&answered_count_, n, timeout);
}
bool StalledHttp2Client::AwaitEnded(int n, absl::Duration timeout) {
  return AwaitCount(&ended_, n, timeout);
}
bool StalledHttp2Client::AwaitResets(int n, absl::Duration timeout) {
  return AwaitCount(&resets_, n, timeout);
}

}  // namespace testing
}  // namespace ferry

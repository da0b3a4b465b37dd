#include "rpc/auth/node_key.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ferry {

struct NodeKey::Pkey {
  explicit Pkey(EVP_PKEY* p) : pkey(p) {}
  ~Pkey() { EVP_PKEY_free(pkey); }
  EVP_PKEY* const pkey;
};

namespace {

struct CtxFree {
  void operator()(EVP_PKEY_CTX* ctx) const { EVP_PKEY_CTX_free(ctx); }
};
using Ctx = std::unique_ptr<EVP_PKEY_CTX, CtxFree>;

const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

void AppendNode(std::string* out, const KeyedNode& n) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((n.node >> shift) & 0xff));
  }
  // Keys are fixed-size, so the encoding is unambiguous; a wrong-sized one
  // (never accepted by Agree) still derives something nobody else can.
  out->push_back(static_cast<char>(n.public_key.size()));
  out->append(n.public_key.data(), n.public_key.size());
}

// OpenSSL 3's HKDF, fetched once: an EVP_PKEY_CTX made per derivation
// looks the algorithm up each time (half of a derivation's ~5 us).
EVP_KDF* Hkdf() {
  static EVP_KDF* const kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) std::abort();  // OpenSSL's default provider lacks it.
  return kdf;
}

// HKDF-SHA256(secret, salt = the scheme's name, info) → kTokenBytes.
std::string Derive(absl::string_view secret, const std::string& info) {
  static constexpr absl::string_view kSalt = "ferry node identity v1";
  static constexpr char kDigest[] = "SHA256";
  std::string out(kTokenBytes, '\0');
  std::unique_ptr<EVP_KDF_CTX, void (*)(EVP_KDF_CTX*)> ctx(
      EVP_KDF_CTX_new(Hkdf()), EVP_KDF_CTX_free);
  // The parameters only point at the buffers (octet strings are read, not
  // written, despite OSSL_PARAM's non-const pointers).
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
                                       const_cast<char*>(kDigest), 0),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_SALT, const_cast<char*>(kSalt.data()), kSalt.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()), secret.size()),
      OSSL_PARAM_construct_octet_string(
          OSSL_KDF_PARAM_INFO, const_cast<char*>(info.data()), info.size()),
      OSSL_PARAM_construct_end()};
  // HKDF over in-memory buffers fails only if OpenSSL cannot allocate.
  if (ctx == nullptr ||
      EVP_KDF_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()),
                     out.size(), params) <= 0) {
    std::abort();
  }
  return out;
}

}  // namespace

NodeKey::NodeKey(std::unique_ptr<Pkey> pkey, std::string public_key)
    : pkey_(std::move(pkey)), public_key_(std::move(public_key)) {}

NodeKey::~NodeKey() = default;

std::shared_ptr<const NodeKey> NodeKey::Generate() {
  EVP_PKEY* raw = nullptr;
  Ctx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr));
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
      EVP_PKEY_keygen(ctx.get(), &raw) <= 0) {
    std::abort();
  }
  auto pkey = std::make_unique<Pkey>(raw);
  std::string public_key(kPublicKeyBytes, '\0');
  size_t size = public_key.size();
  if (EVP_PKEY_get_raw_public_key(
          raw, reinterpret_cast<unsigned char*>(public_key.data()), &size) <=
          0 ||
      size != kPublicKeyBytes) {
    std::abort();
  }
  return std::shared_ptr<const NodeKey>(
      new NodeKey(std::move(pkey), std::move(public_key)));
}

absl::StatusOr<std::string> NodeKey::Agree(
    absl::string_view peer_public) const {
  if (peer_public.size() != kPublicKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a public key of ", peer_public.size(), " bytes (X25519 ",
                     "keys have ", kPublicKeyBytes, ")"));
  }
  EVP_PKEY* peer = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_X25519, nullptr, Bytes(peer_public), peer_public.size());
  Pkey peer_owner(peer);
  std::string secret(kTokenBytes, '\0');
  size_t size = secret.size();
  Ctx ctx(EVP_PKEY_CTX_new(pkey_->pkey, nullptr));
  // OpenSSL refuses a peer key whose product is the all-zero point.
  if (peer == nullptr || ctx == nullptr ||
      EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer) <= 0 ||
      EVP_PKEY_derive(ctx.get(),
                      reinterpret_cast<unsigned char*>(secret.data()),
                      &size) <= 0 ||
      size != kTokenBytes || secret == std::string(kTokenBytes, '\0')) {
    return absl::InvalidArgumentError(
        "a public key that yields no pair secret (a low-order point)");
  }
  return secret;
}

absl::Status CheckPublicKey(absl::string_view public_key,
                            absl::string_view what) {
  // Any key pair shows whether the point is usable.
  static const auto* const probe =
      new std::shared_ptr<const NodeKey>(NodeKey::Generate());
  absl::StatusOr<std::string> secret = (*probe)->Agree(public_key);
  if (secret.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", secret.status().message()));
}

std::string CallToken(absl::string_view secret, const KeyedNode& from,
                      const KeyedNode& to) {
  std::string info = "call";
  AppendNode(&info, from);
  AppendNode(&info, to);
  return Derive(secret, info);
}

std::string VoucherTag(absl::string_view secret, const KeyedNode& issuer,
                       const KeyedNode& verifier, const KeyedNode& client) {
  std::string info = "voucher";
  AppendNode(&info, issuer);
  AppendNode(&info, verifier);
  AppendNode(&info, client);
  return Derive(secret, info);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

std::string NewSecret() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) std::abort();
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

uint64_t RandomU64() {
  uint64_t v = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v)) != 1) {
    std::abort();
  }
  return v;
}

}  // namespace ferry

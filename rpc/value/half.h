// 16-bit floating-point element types: IEEE binary16 (float16) and bfloat16.
//
// Both are storage types: arithmetic converts to float, computes, and rounds
// back (round to nearest even), which is what torch does on CPU.
#ifndef FERRY_RPC_VALUE_HALF_H_
#define FERRY_RPC_VALUE_HALF_H_

#include <cstdint>
#include <cstring>

namespace ferry {

namespace half_internal {

inline uint32_t FloatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  return x;
}

inline float BitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof(f));
  return f;
}

// Rounds `value >> shift` to nearest, ties to even.
inline uint32_t ShiftRoundEven(uint32_t value, int shift) {
  if (shift >= 32) return 0;
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1))) ++kept;
  return kept;
}

inline uint16_t FloatToHalfBits(float f) {
  uint32_t x = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t mant = x & 0x007fffff;
  int exp = static_cast<int>((x >> 23) & 0xff);
  if (exp == 0xff) {  // Inf or NaN (NaN keeps a quiet payload bit).
    return sign | 0x7c00 | (mant ? 0x0200 | (mant >> 13) : 0);
  }
  int e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {  // Subnormal half (or zero): value = m * 2^-24.
    if (e < -10) return sign;
    return sign |
           static_cast<uint16_t>(ShiftRoundEven(mant | 0x00800000, 14 - e));
  }
  // A carry out of the mantissa correctly bumps the exponent (up to Inf).
  uint32_t bits = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (bits & 1))) ++bits;
  return sign | static_cast<uint16_t>(bits);
}

inline float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // Zero or subnormal: mant * 2^-24, exact in float.
    float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exp == 0x1f) return BitsFloat(sign | 0x7f800000 | (mant << 13));
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t FloatToBFloat16Bits(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7fffffff) > 0x7f800000) {  // NaN: keep it a (quiet) NaN.
    return static_cast<uint16_t>((x >> 16) | 0x0040);
  }
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

inline float BFloat16BitsToFloat(uint16_t b) {
  return BitsFloat(static_cast<uint32_t>(b) << 16);
}

}  // namespace half_internal

// IEEE 754 binary16.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(half_internal::FloatToHalfBits(f)) {}
  static Float16 FromBits(uint16_t b) {
    Float16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const {
    return half_internal::HalfBitsToFloat(bits);
  }
};

// Brain floating point: the top 16 bits of a float32.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(half_internal::FloatToBFloat16Bits(f)) {}
  static BFloat16 FromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const {
    return half_internal::BFloat16BitsToFloat(bits);
  }
};

static_assert(sizeof(Float16) == 2, "Float16 must be 2 bytes");
static_assert(sizeof(BFloat16) == 2, "BFloat16 must be 2 bytes");

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_HALF_H_

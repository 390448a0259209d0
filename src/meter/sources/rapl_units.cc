// The counter arithmetic and sysfs parsers of the RAPL sources (rapl_internal.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "src/meter/sources/rapl_internal.h"

namespace kwatt::meter::rapl_internal {

namespace {

using u128 = unsigned __int128;

constexpr uint64_t kMicrojoulesPerJoule = 1'000'000;
constexpr uint64_t kNanojoulesPerJoule = 1'000'000'000;
// Power-of-two units tried: 2^0 J .. 2^-19 J (1.9 uJ: below, a count is under 1 uJ and
// floor(raw * unit) no longer tells counts apart).
constexpr int kLargestUnitExponent = 19;

std::string Quoted(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 40)) out += (c == '\n') ? std::string("\\n") : std::string(1, c);
  if (text.size() > 40) out += "...";
  return out + "'";
}

std::string RangeText(uint64_t range) {
  for (int bits = 1; bits < 64; ++bits) {
    if (range == (uint64_t(1) << bits)) return std::to_string(bits) + "-bit";
  }
  return "range " + std::to_string(range);
}

bool Matches(uint64_t max_range, uint64_t range, Microjoules unit) {
  return MaxEnergyRange(range, unit) == max_range;
}

CounterLayout PowerOfTwoLayout(uint64_t range, int exponent, bool kernel_truncated) {
  CounterLayout layout;
  layout.range = range;
  layout.hardware_unit = {kMicrojoulesPerJoule, uint64_t(1) << exponent};
  std::string unit = "2^-" + std::to_string(exponent) + " J counts";
  if (kernel_truncated) {
    uint64_t nanojoules = kNanojoulesPerJoule >> exponent;
    layout.reported_unit = {nanojoules, 1000};
    unit += " (the kernel's " + std::to_string(nanojoules) + " nJ unit)";
  } else {
    layout.reported_unit = layout.hardware_unit;
    unit += " (an exact unit)";
  }
  layout.description = unit + ", " + RangeText(range);
  return layout;
}

}  // namespace

uint64_t MaxEnergyRange(uint64_t range, Microjoules unit) {
  if (range == 0 || unit.denominator == 0) return 0;
  u128 value = u128(range - 1) * unit.numerator / unit.denominator;
  return value > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                      : uint64_t(value);
}

CounterLayout InferCounterLayout(uint64_t max_range) {
  // 1. The 32-bit hardware counter every RAPL part has, with the kernel's truncated nanojoule unit
  //    (what Linux reports), then an exact power-of-two unit, then any whole-nanojoule unit.
  const uint64_t full = uint64_t(1) << 32;
  for (int exponent = 0; exponent <= kLargestUnitExponent; ++exponent) {
    for (bool truncated : {true, false}) {
      CounterLayout layout = PowerOfTwoLayout(full, exponent, truncated);
      if (Matches(max_range, full, layout.reported_unit)) return layout;
    }
  }
  {
    // floor((2^32 - 1) * k / 1000) = max_range for at most one k (each k adds 4.29e6).
    u128 k = (u128(max_range) * 1000 + (full - 2)) / (full - 1);
    if (k >= 1000 && k <= std::numeric_limits<uint32_t>::max() &&
        Matches(max_range, full, {uint64_t(k), 1000})) {
      CounterLayout layout;
      layout.range = full;
      layout.reported_unit = layout.hardware_unit = {uint64_t(k), 1000};
      layout.description = std::to_string(uint64_t(k)) + " nJ counts, 32-bit";
      return layout;
    }
  }
  // 2. Smaller ranges with power-of-two units: simulated trees that force wraps. A range and
  //    unit may give the same maximum as another pair ((2^12 - 1) x 2^-16 J and (2^14 - 1) x the
  //    kernel's 2^-18 J): RAPL's own units, 2^-14 and 2^-16 J, are tried first.
  static constexpr int kExponents[] = {14, 16, 15, 13, 17, 12, 18, 11, 19, 10,
                                       9,  8,  7,  6,  5,  4,  3,  2,  1,  0};
  for (int exponent : kExponents) {
    for (int bits = 31; bits >= 8; --bits) {
      const uint64_t range = uint64_t(1) << bits;
      for (bool truncated : {true, false}) {
        CounterLayout layout = PowerOfTwoLayout(range, exponent, truncated);
        if (Matches(max_range, range, layout.reported_unit)) return layout;
      }
    }
  }
  // 3. Unknown: whole microjoules, the range plus an estimated unit of a 32-bit counter.
  CounterLayout layout;
  layout.known = false;
  uint64_t unit = max_range / (full - 1);
  if (max_range % (full - 1) >= (full - 1) / 2) ++unit;
  if (unit == 0) unit = 1;
  layout.range = max_range > std::numeric_limits<uint64_t>::max() - unit
                     ? std::numeric_limits<uint64_t>::max()
                     : max_range + unit;
  layout.reported_unit = layout.hardware_unit = {1, 1};
  layout.description = "an unknown unit: microjoules wrapping at " + std::to_string(max_range) +
                       " + " + std::to_string(unit) + " (a wrap may be off by up to one unit)";
  return layout;
}

uint64_t RawCount(uint64_t reported, const CounterLayout& layout) {
  const Microjoules& unit = layout.reported_unit;
  if (unit.numerator == unit.denominator) return reported;
  u128 scaled = u128(reported) * unit.denominator;
  return uint64_t((scaled + unit.numerator - 1) / unit.numerator);
}

int64_t CountToMicrojoules(uint64_t count, Microjoules unit) {
  if (unit.denominator == 0) return 0;
  u128 value = u128(count) * unit.numerator / unit.denominator;
  constexpr u128 kMax = u128(std::numeric_limits<int64_t>::max());
  return value > kMax ? std::numeric_limits<int64_t>::max() : int64_t(value);
}

int64_t RangeMicrojoules(const CounterLayout& layout) {
  return CountToMicrojoules(layout.range, layout.hardware_unit);
}

Result<uint64_t> ParseSysfsUnsigned(std::string_view text) {
  std::string_view digits = text;
  if (!digits.empty() && digits.back() == '\n') digits.remove_suffix(1);
  if (digits.empty()) return Status::Corruption("an empty value where a number was expected");
  uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return Status::Corruption("not a number: " + Quoted(text));
    uint64_t digit = uint64_t(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return Status::Corruption("a number beyond 64 bits: " + Quoted(text));
    }
    value = value * 10 + digit;
  }
  return value;
}

Result<uint64_t> ParsePerfEventConfig(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  constexpr std::string_view kPrefix = "event=";
  if (s.substr(0, kPrefix.size()) != kPrefix) {
    return Status::InvalidArgument("a perf event that is not 'event=N': " + Quoted(text));
  }
  s.remove_prefix(kPrefix.size());
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty() || s.size() > 16) {
    return Status::InvalidArgument("a perf event that is not 'event=N': " + Quoted(text));
  }
  uint64_t value = 0;
  for (char c : s) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return Status::InvalidArgument("a perf event that is not 'event=N': " + Quoted(text));
    }
    if (value > (std::numeric_limits<uint64_t>::max() - uint64_t(digit)) / uint64_t(base)) {
      return Status::InvalidArgument("a perf event beyond 64 bits: " + Quoted(text));
    }
    value = value * uint64_t(base) + uint64_t(digit);
  }
  return value;
}

Result<PerfScale> ParsePerfScale(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  auto bad = [&] { return Status::InvalidArgument("not a perf scale: " + Quoted(text)); };
  // Digits of the mantissa (integer and fraction), then an optional exponent.
  u128 mantissa = 0;
  int digits = 0;
  int exponent = 0;
  bool any = false, dot = false, rounded = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (dot) return bad();
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any = true;
    if (mantissa == 0 && c == '0') {
      if (dot) --exponent;
      continue;
    }
    if (digits < 36) {
      mantissa = mantissa * 10 + u128(c - '0');
      ++digits;
      if (dot) --exponent;
    } else {
      rounded = true;
      if (!dot) ++exponent;
    }
  }
  if (!any) return bad();
  if (i < s.size()) {
    if (s[i] != 'e' && s[i] != 'E') return bad();
    ++i;
    bool negative = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
    if (i == s.size() || s.size() - i > 4) return bad();
    int e = 0;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return bad();
      e = e * 10 + (s[i] - '0');
    }
    exponent += negative ? -e : e;
  }
  if (mantissa == 0) return Status::InvalidArgument("a perf scale of zero: " + Quoted(text));
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  PerfScale scale;
  // 2^-k = 5^k * 10^-k: a power of two exactly when the mantissa is 5^k and the exponent -k.
  if (!rounded && exponent <= 0 && -exponent <= 55) {
    u128 five = 1;
    for (int k = 0; k < -exponent; ++k) five *= 5;
    if (five == mantissa) {
      scale.power_of_two = true;
      scale.shift = -exponent;
      return scale;
    }
  }
  while (mantissa >= u128(1'000'000'000'000'000'000ull)) {  // 18 significant digits
    u128 rest = mantissa % 10;
    mantissa /= 10;
    if (rest >= 5) ++mantissa;
    ++exponent;
  }
  if (exponent < -60 || exponent > 30) return bad();
  scale.mantissa = uint64_t(mantissa);
  scale.exponent = exponent;
  return scale;
}

int64_t PerfCountToMicrojoules(uint64_t count, const PerfScale& scale) {
  constexpr u128 kMax = u128(std::numeric_limits<int64_t>::max());
  u128 value;
  if (scale.power_of_two) {
    value = (u128(count) * kMicrojoulesPerJoule) >> scale.shift;
  } else {
    value = u128(count) * scale.mantissa;
    int e = scale.exponent + 6;
    for (; e > 0; --e) {
      if (value > kMax) break;
      value *= 10;
    }
    for (; e < 0 && value > 0; ++e) value /= 10;
  }
  return value > kMax ? std::numeric_limits<int64_t>::max() : int64_t(value);
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  auto bad = [&] { return Status::InvalidArgument("not a CPU list: " + Quoted(text)); };
  std::vector<int> cpus;
  if (s.empty()) return bad();
  auto number = [&](std::string_view n, int* out) {
    if (n.empty() || n.size() > 6) return false;
    int v = 0;
    for (char c : n) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  };
  while (true) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    size_t dash = item.find('-');
    int first, last;
    if (dash == std::string_view::npos) {
      if (!number(item, &first)) return bad();
      last = first;
    } else if (!number(item.substr(0, dash), &first) || !number(item.substr(dash + 1), &last) ||
               last < first) {
      return bad();
    }
    if (cpus.size() + size_t(last - first) > 65536) return bad();
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return cpus;
}

std::string ZoneKind(std::string_view name) {
  if (!name.empty() && name.back() == '\n') name.remove_suffix(1);
  if (name.substr(0, 8) == "package-") return "package";
  if (name == "core" || name == "uncore" || name == "dram") return std::string(name);
  if (name == "psys" || name.substr(0, 5) == "psys-") return "psys";
  return "";
}

bool DomainBefore(const Domain& a, const Domain& b) {
  auto order = [](const std::string& kind) {
    static const char* kOrder[] = {"package", "core", "uncore", "dram", "psys"};
    for (int i = 0; i < 5; ++i) {
      if (kind == kOrder[i]) return i;
    }
    return 5;
  };
  bool a_psys = a.kind == "psys", b_psys = b.kind == "psys";
  if (a_psys != b_psys) return b_psys;
  if (a.socket != b.socket) return a.socket < b.socket;
  if (order(a.kind) != order(b.kind)) return order(a.kind) < order(b.kind);
  return a.name < b.name;
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int error = errno;
    if (error == ENOENT || error == ENOTDIR) return Status::NotFound(path + " does not exist");
    if (error == EACCES || error == EPERM) {
      return Status::PermissionDenied(path + " cannot be read: " + std::strerror(error));
    }
    return Status::IOError(path + ": " + std::strerror(error));
  }
  std::string text;
  char buffer[4096];
  while (text.size() < 65536) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int error = errno;
      ::close(fd);
      return Status::IOError(path + ": " + std::strerror(error));
    }
    if (n == 0) break;
    text.append(buffer, size_t(n));
  }
  ::close(fd);
  return text;
}

}  // namespace kwatt::meter::rapl_internal

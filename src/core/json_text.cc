#include "kwatt/core/json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>

#include "kwatt/core/null_value.h"

namespace kwatt {

size_t FormatJsonNumber(double value, char* out) {
  if (IsNullValue(value)) {
    std::memcpy(out, "null", 4);
    return 4;
  }
  if (std::isnan(value)) {
    std::memcpy(out, "\"NaN\"", 5);
    return 5;
  }
  if (std::isinf(value)) {
    const char* text = value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
    size_t n = std::strlen(text);
    std::memcpy(out, text, n);
    return n;
  }
  if (value == 0) {  // also -0.0, which PostgreSQL prints "-0"
    if (std::signbit(value)) {
      std::memcpy(out, "-0", 2);
      return 2;
    }
    out[0] = '0';
    return 1;
  }
  // Integral values below 2^53 print as integers, the common case, without the general path.
  if (std::fabs(value) < 9007199254740992.0 && value == std::trunc(value)) {
    return size_t(std::to_chars(out, out + kMaxNumberLength, int64_t(value)).ptr - out);
  }
  // Shortest round-trip text; to_chars picks fixed or scientific, whichever is shorter, as
  // PostgreSQL (extra_float_digits >= 1) does. PostgreSQL writes "1e+20"; so does to_chars.
  return size_t(std::to_chars(out, out + kMaxNumberLength, value).ptr - out);
}

void AppendJsonNumber(std::string* out, double value) {
  char buffer[kMaxNumberLength];
  out->append(buffer, FormatJsonNumber(value, buffer));
}

void AppendJsonString(std::string* out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[(c >> 4) & 0xF]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

namespace {

JsonValueKind KindOfLiteral(std::string_view text) {
  if (text.empty()) return JsonValueKind::kFloat;
  if (text[0] == 'n') return JsonValueKind::kNull;
  if (text[0] == '"') return JsonValueKind::kText;
  for (char c : text) {
    if (c == '.' || c == 'e' || c == 'E') return JsonValueKind::kFloat;
    if (!(c == '-' || c == '+' || (c >= '0' && c <= '9'))) break;
  }
  return JsonValueKind::kInt;
}

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

JsonValueKind RowValueKind(std::string_view row) {
  constexpr std::string_view kKey = "\"value\"";
  for (size_t at = row.find(kKey); at != std::string_view::npos; at = row.find(kKey, at + 1)) {
    size_t i = at + kKey.size();
    while (i < row.size() && IsJsonSpace(row[i])) ++i;
    if (i >= row.size() || row[i] != ':') continue;  // a string "value", not the key
    ++i;
    while (i < row.size() && IsJsonSpace(row[i])) ++i;
    return KindOfLiteral(row.substr(i));
  }
  return JsonValueKind::kFloat;
}

JsonValueKind NumberKind(double value) {
  char text[kMaxNumberLength];
  return KindOfLiteral(std::string_view(text, FormatJsonNumber(value, text)));
}

std::string JsonbObjectText(std::vector<std::pair<std::string, std::string>> members) {
  // Last value of a key wins: keep the last occurrence of each key, then order as jsonb does.
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < members.size(); ++i) last[members[i].first] = i;
  std::vector<size_t> kept;
  kept.reserve(last.size());
  for (const auto& [key, index] : last) kept.push_back(index);
  std::sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
    const std::string& ka = members[a].first;
    const std::string& kb = members[b].first;
    if (ka.size() != kb.size()) return ka.size() < kb.size();
    return ka < kb;
  });
  std::string out = "{";
  for (size_t index : kept) {
    if (out.size() > 1) out += ',';
    AppendJsonString(&out, members[index].first);
    out += ':';
    out += members[index].second;
  }
  out += '}';
  return out;
}

}  // namespace kwatt

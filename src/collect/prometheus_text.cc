#include "kwatt/collect/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace kwatt::collect {
namespace {

constexpr std::string_view kTypes[] = {"counter", "gauge", "histogram", "summary", "untyped"};

bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? char(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// A value as Go's strconv.ParseFloat reads the ones exporters write: a decimal number with an
// optional sign and exponent, or NaN / Inf / Infinity in any case, with an optional sign.
bool ParseValue(std::string_view text, double* value) {
  if (text.empty()) return false;
  bool negative = text[0] == '-';
  std::string_view body = text[0] == '+' || text[0] == '-' ? text.substr(1) : text;
  if (EqualsIgnoringCase(body, "nan")) {
    *value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (EqualsIgnoringCase(body, "inf") || EqualsIgnoringCase(body, "infinity")) {
    *value = negative ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
    return true;
  }
  if (body.empty() || body[0] == '+' || body[0] == '-') return false;
  double parsed = 0;
  auto [end, error] = std::from_chars(body.data(), body.data() + body.size(), parsed);
  if (end != body.data() + body.size()) return false;
  if (error == std::errc::result_out_of_range) {
    // Rounds to zero or to infinity, as ParseFloat's value (it also reports the range).
    bool tiny = body.find_first_of("eE") != std::string_view::npos &&
                body[body.find_first_of("eE") + 1] == '-';
    parsed = tiny ? 0.0 : std::numeric_limits<double>::infinity();
  } else if (error != std::errc()) {
    return false;
  }
  *value = negative ? -parsed : parsed;
  return true;
}

class LineReader {
 public:
  LineReader(std::string_view line, size_t number) : line_(line), number_(number) {}

  Status Error(const std::string& what) const {
    return Status::InvalidArgument("line " + std::to_string(number_) + ", column " +
                                   std::to_string(at_ + 1) + ": " + what);
  }
  bool AtEnd() const { return at_ >= line_.size(); }
  char Peek() const { return line_[at_]; }
  void SkipBlanks() {
    while (!AtEnd() && IsSpaceOrTab(Peek())) ++at_;
  }
  std::string_view Name(bool label) {
    size_t begin = at_;
    if (AtEnd() || !IsNameStart(Peek()) || (label && Peek() == ':')) return {};
    ++at_;
    while (!AtEnd() && IsNameChar(Peek()) && !(label && Peek() == ':')) ++at_;
    return line_.substr(begin, at_ - begin);
  }
  std::string_view Token() {
    size_t begin = at_;
    while (!AtEnd() && !IsSpaceOrTab(Peek())) ++at_;
    return line_.substr(begin, at_ - begin);
  }
  std::string_view Rest() const { return line_.substr(std::min(at_, line_.size())); }
  bool Take(char c) {
    if (AtEnd() || Peek() != c) return false;
    ++at_;
    return true;
  }
  // A quoted label value after its opening quote, unescaped into *out.
  Status QuotedValue(std::string* out) {
    out->clear();
    while (!AtEnd()) {
      char c = line_[at_++];
      if (c == '"') return Status::OK();
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (AtEnd()) break;
      char escaped = line_[at_++];
      if (escaped == 'n') {
        out->push_back('\n');
      } else if (escaped == '\\' || escaped == '"') {
        out->push_back(escaped);
      } else {
        at_ -= 2;  // the error points at the backslash
        return Error(std::string("a label value may escape only \\\\, \\\" and \\n, not \\") +
                     escaped);
      }
    }
    return Error("the label value is not closed by a '\"'");
  }

 private:
  std::string_view line_;
  size_t number_;
  size_t at_ = 0;
};

}  // namespace

Status ReadPrometheusText(std::string_view text, const PrometheusSampleCallback& each) {
  std::unordered_map<std::string, std::string_view> types;  // family name -> a kTypes entry
  PrometheusSample sample;
  std::string value_text;
  size_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineReader r(line, number);
    r.SkipBlanks();
    if (r.AtEnd()) continue;
    if (r.Take('#')) {
      r.SkipBlanks();
      std::string_view keyword = r.Token();
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a comment
      r.SkipBlanks();
      std::string_view name = r.Name(false);
      if (name.empty()) return r.Error("# " + std::string(keyword) + " names no metric");
      if (keyword == "HELP") continue;
      r.SkipBlanks();
      std::string_view type = r.Token();
      std::string_view known;
      for (std::string_view t : kTypes) {
        if (t == type) known = t;
      }
      if (known.empty()) {
        return r.Error("\"" + std::string(type) +
                       "\" is not a metric type (counter, gauge, histogram, summary, untyped)");
      }
      r.SkipBlanks();
      if (!r.AtEnd()) return r.Error("unexpected text after the type: " + std::string(r.Rest()));
      if (!types.emplace(std::string(name), known).second) {
        return r.Error("a second # TYPE line for " + std::string(name));
      }
      continue;
    }
    std::string_view name = r.Name(false);
    if (name.empty()) return r.Error("a sample should start with a metric name");
    sample.name.assign(name);
    sample.labels.clear();
    sample.timestamp_ms.reset();
    r.SkipBlanks();
    if (r.Take('{')) {
      while (true) {
        r.SkipBlanks();
        if (r.Take('}')) break;
        std::string_view label = r.Name(true);
        if (label.empty()) return r.Error("a label name or '}' was expected");
        for (const auto& [given, unused] : sample.labels) {
          if (given == label) return r.Error("the label " + std::string(label) + " is given twice");
        }
        r.SkipBlanks();
        if (!r.Take('=')) return r.Error("'=' was expected after the label " + std::string(label));
        r.SkipBlanks();
        if (!r.Take('"')) return r.Error("a label value should be quoted");
        sample.labels.emplace_back(std::string(label), std::string());
        KWATT_RETURN_IF_ERROR(r.QuotedValue(&sample.labels.back().second));
        r.SkipBlanks();
        if (r.Take(',')) continue;
        if (r.Take('}')) break;
        return r.Error("',' or '}' was expected after a label");
      }
      r.SkipBlanks();
    }
    std::string_view value = r.Token();
    if (value.empty()) return r.Error("the sample " + sample.name + " has no value");
    if (!ParseValue(value, &sample.value)) {
      return r.Error("\"" + std::string(value) + "\" is not a number");
    }
    r.SkipBlanks();
    if (!r.AtEnd()) {
      std::string_view stamp = r.Token();
      int64_t ms = 0;
      auto [stop, error] = std::from_chars(stamp.data(), stamp.data() + stamp.size(), ms);
      if (error != std::errc() || stop != stamp.data() + stamp.size()) {
        return r.Error("the timestamp \"" + std::string(stamp) +
                       "\" is not an integer of milliseconds");
      }
      sample.timestamp_ms = ms;
      r.SkipBlanks();
      if (!r.AtEnd()) {
        return r.Error("unexpected text after the timestamp: " + std::string(r.Rest()));
      }
    }
    sample.type = "untyped";
    if (auto it = types.find(sample.name); it != types.end()) {
      sample.type = it->second;
    } else {
      for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
        if (!sample.name.ends_with(suffix)) continue;
        auto family = types.find(sample.name.substr(0, sample.name.size() - suffix.size()));
        if (family != types.end() && (family->second == "histogram" ||
                                      (family->second == "summary" && suffix != "_bucket"))) {
          sample.type = family->second;
        }
      }
    }
    KWATT_RETURN_IF_ERROR(each(sample));
  }
  return Status::OK();
}

}  // namespace kwatt::collect

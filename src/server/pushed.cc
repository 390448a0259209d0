#include "src/server/pushed.h"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"
#include "kwatt/core/json_text.h"
#include "kwatt/core/null_value.h"
#include "kwatt/core/row_ids.h"
#include "kwatt/core/row_parser.h"

namespace kwatt::server::internal {

using Json = nlohmann::json;

static_assert(2 + kMaxLabelsDepth <= kwatt::internal::kMaxNestingDepth,
              "kwatt's own reader of metrics answers must read every row a push may store");

namespace {

// A label's number as PostgreSQL's jsonb writes it (a numeric: plain decimal, never an
// exponent): the shortest digits that read back as the double the parser made of it. So 1e22
// is 10000000000000000000000 and 1.5e-7 is 0.00000015 in both stores, as in Kwollect; digits
// beyond a double's (12345678901234567890123) are lost in both alike.
void AppendJsonbNumber(std::string* out, double value) {
  if (value == 0) {  // numeric has no negative zero
    out->push_back('0');
    return;
  }
  char buffer[kMaxNumberLength];
  const char* end =
      std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific).ptr;
  std::string_view text(buffer, size_t(end - buffer));  // "-1.2345e+22"
  if (text.front() == '-') {
    out->push_back('-');
    text.remove_prefix(1);
  }
  const size_t e = text.find('e');
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+'), text.data() + text.size(), exponent);
  std::string digits;
  for (char c : text.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out->append("0.");
    out->append(size_t(-point), '0');
    out->append(digits);
  } else if (size_t(point) >= digits.size()) {
    out->append(digits);
    out->append(size_t(point) - digits.size(), '0');
  } else {
    out->append(digits, 0, size_t(point));
    out->push_back('.');
    out->append(digits, size_t(point));
  }
}

// A value given as text, read as Kwollect's double precision column reads it (PostgreSQL's
// float8in): a number, "NaN", "Infinity" or "inf" with or without a sign, in any case, blanks
// around; InvalidArgument for anything else, and for a number beyond a double.
Result<double> DoubleOfText(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  std::string_view digits = text;
  if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-') digits.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    return Status::InvalidArgument("is out of range for a double (PostgreSQL refuses it too)");
  }
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Status::InvalidArgument(
        "should be a number, a text of one (\"NaN\", \"Infinity\") "
        "or null");
  }
  if (std::isnan(value)) value = std::numeric_limits<double>::quiet_NaN();  // no sign, no payload
  return value;
}

// A JSON value as PostgreSQL's jsonb keeps it, written compactly: object keys ordered by length,
// then bytes (RenderLabels' order), at every depth.
void RenderJsonb(const Json& value, std::string* out) {
  if (value.is_object()) {
    std::vector<const std::string*> keys;
    for (auto it = value.begin(); it != value.end(); ++it) keys.push_back(&it.key());
    std::sort(keys.begin(), keys.end(), [](const std::string* a, const std::string* b) {
      return a->size() != b->size() ? a->size() < b->size() : *a < *b;
    });
    out->push_back('{');
    for (const std::string* key : keys) {
      if (out->back() != '{') out->push_back(',');
      AppendJsonString(out, *key);
      out->push_back(':');
      RenderJsonb(value.at(*key), out);
    }
    out->push_back('}');
  } else if (value.is_array()) {
    out->push_back('[');
    for (const Json& item : value) {
      if (out->back() != '[') out->push_back(',');
      RenderJsonb(item, out);
    }
    out->push_back(']');
  } else if (value.is_string()) {
    AppendJsonString(out, value.get<std::string>());
  } else if (value.is_number_float()) {
    AppendJsonbNumber(out, value.get<double>());
  } else {
    *out += value.dump();  // integers, true, false, null
  }
}

std::string Shown(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// An id field of `row`: a string that the metrics query can ask for (kwatt/core/row_ids.h).
Status Id(const Json& row, const char* field, bool device, std::string* out) {
  auto it = row.find(field);
  if (it == row.end() || it->is_null()) {
    return Status::InvalidArgument(std::string("has no \"") + field + "\"");
  }
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string("\"") + field + "\" = " + Shown(*it) +
                                   ": should be a string");
  }
  *out = it->get<std::string>();
  Status servable = device ? CheckDeviceId(*out) : CheckMetricId(*out);
  if (!servable.ok()) {
    return Status::InvalidArgument(std::string("\"") + field + "\" = " + Shown(*it) + ": " +
                                   servable.message());
  }
  return Status::OK();
}

// InvalidArgument naming the row whose nesting exceeds what a row may have (its labels
// kMaxLabelsDepth levels, below the array and the row), found without parsing: a parser or a
// writer that recurses would overflow its stack on such a body first.
Status CheckNesting(std::string_view body) {
  constexpr int kMaxDepth = 2 + kMaxLabelsDepth;  // the array, the row, its labels
  int depth = 0;
  int64_t row = 1;               // counted from 1 by the commas at depth 1
  std::string_view last_string;  // the last string at depth 2: the key of the field opened
  bool in_array = false;         // the body is an array (of rows)
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '"') {
      size_t begin = ++i;
      while (i < body.size() && body[i] != '"') i += body[i] == '\\' ? 2 : 1;
      if (depth == 2) last_string = body.substr(begin, std::min(i, body.size()) - begin);
    } else if (c == '{' || c == '[') {
      if (depth == 0) in_array = c == '[';
      if (++depth > kMaxDepth) {
        std::string where = in_array ? "row " + std::to_string(row) + " " : "the body ";
        if (in_array && !last_string.empty()) {
          where += "\"" + std::string(last_string.substr(0, 60)) + "\" ";
        }
        return Status::InvalidArgument(
            where + "nests deeper than a row may: labels may nest " +
            std::to_string(kMaxLabelsDepth) +
            " levels deep (the labels object being the first), which every client reads; "
            "nothing was stored");
      }
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 1) {
      ++row;
      last_string = {};
    }
  }
  return Status::OK();
}

Status ParseRow(const Json& row, UnixNanos now, PushedRow* out) {
  if (!row.is_object()) {
    return Status::InvalidArgument("is a " + std::string(row.type_name()) + ", not an object");
  }
  KWATT_RETURN_IF_ERROR(Id(row, "device_id", true, &out->device_id));
  KWATT_RETURN_IF_ERROR(Id(row, "metric_id", false, &out->metric_id));
  auto value = row.find("value");
  if (value == row.end()) return Status::InvalidArgument("has no \"value\"");
  if (value->is_null()) {
    out->value = NullValue();
  } else if (value->is_number()) {
    out->value = value->get<double>();
  } else if (value->is_string()) {
    Result<double> number = DoubleOfText(value->get_ref<const std::string&>());
    if (!number.ok()) return number.status().WithContext("\"value\" = " + Shown(*value));
    out->value = *number;
  } else {
    return Status::InvalidArgument("\"value\" = " + Shown(*value) +
                                   ": should be a number, a text of one (\"NaN\", \"Infinity\") "
                                   "or null");
  }
  out->t = FloorDiv(now, kNanosPerMicro) * kNanosPerMicro;  // what a store keeps
  if (auto time = row.find("timestamp"); time != row.end() && !time->is_null()) {
    if (!time->is_number() && !time->is_string()) {
      return Status::InvalidArgument("\"timestamp\" = " + Shown(*time) +
                                     ": should be epoch seconds or a timestamp text");
    }
    std::string text = time->is_string() ? time->get<std::string>() : time->dump();
    Result<UnixNanos> t = ParseKwollectTimeParameter(text);
    if (!t.ok())
      return Status::InvalidArgument("\"timestamp\" = " + Shown(*time) + ": " +
                                     t.status().message());
    out->t = *t;
  }
  out->labels_json = "{}";
  if (auto labels = row.find("labels"); labels != row.end() && !labels->is_null()) {
    if (!labels->is_object()) {
      return Status::InvalidArgument("\"labels\" = " + Shown(*labels) + ": should be an object");
    }
    out->labels_json.clear();
    RenderJsonb(*labels, &out->labels_json);
    if (out->labels_json.find("\\u0000") != std::string::npos) {
      // Refused alike by every store: Kwollect's labels are PostgreSQL's jsonb, which cannot
      // hold it ("unsupported Unicode escape sequence").
      return Status::InvalidArgument(
          "\"labels\" hold the character \\u0000, which PostgreSQL's jsonb (Kwollect's labels) "
          "cannot keep");
    }
    if (out->labels_json.size() > kMaxLabelsBytes) {
      return Status::InvalidArgument("\"labels\" are " + std::to_string(out->labels_json.size()) +
                                     " bytes of JSON, more than the " +
                                     std::to_string(kMaxLabelsBytes) +
                                     " bytes a row's labels may have");
    }
  }
  return Status::OK();
}

}  // namespace

std::string LabelsWithout(std::string_view labels_json, std::string_view key) {
  if (labels_json.find(key) == std::string_view::npos) return std::string(labels_json);
  Json labels = Json::parse(labels_json, nullptr, /*allow_exceptions=*/false);
  if (!labels.is_object() || !labels.contains(key)) return std::string(labels_json);
  labels.erase(std::string(key));
  std::string out;
  RenderJsonb(labels, &out);
  return out;
}

RowBatch ToRowBatch(const std::vector<PushedRow>& rows, StringInterner* interner) {
  RowBatch batch;
  for (const PushedRow& row : rows) {
    batch.time.push_back(row.t);
    batch.utc_offset.push_back(ParisUtcOffsetSeconds(FloorDiv(row.t, kNanosPerSecond)));
    batch.device.push_back(interner->Intern(row.device_id));
    batch.metric.push_back(interner->Intern(row.metric_id));
    batch.value.push_back(row.value);
    batch.labels.push_back(interner->Intern(row.labels_json));
  }
  return batch;
}

Result<std::vector<PushedRow>> ParsePushedRows(std::string_view body, UnixNanos now) {
  KWATT_RETURN_IF_ERROR(CheckNesting(body));
  Json doc;
  try {
    doc = Json::parse(body);
  } catch (const Json::exception& e) {
    // Why, and where when the parser knows ("parse error at line 1, column 9: ...", "number
    // overflow parsing '1e400'": a number beyond a double, which PostgreSQL refuses too).
    std::string why = e.what();
    const size_t tag = why.find("] ");
    why = " (" + (tag == std::string::npos ? why : why.substr(tag + 2)) + ")";
    return Status::InvalidArgument(
        "the body is not JSON" + why +
        ": send a JSON array of rows "
        "[{\"timestamp\": 1713441600.5, \"device_id\": \"nova-1\", \"metric_id\": \"my_metric\", "
        "\"value\": 42, \"labels\": {}}]");
  }
  if (!doc.is_array()) {
    return Status::InvalidArgument("the body is a " + std::string(doc.type_name()) +
                                   ", not a JSON array of rows");
  }
  std::vector<PushedRow> rows(doc.size());
  for (size_t i = 0; i < doc.size(); ++i) {
    Status status = ParseRow(doc[i], now, &rows[i]);
    if (!status.ok()) {
      return Status::InvalidArgument("row " + std::to_string(i + 1) + " " + status.message() +
                                     "; nothing was stored");
    }
  }
  AliasPushedRows(&rows);
  return rows;
}

void AliasPushedRows(std::vector<PushedRow>* rows) {
  std::vector<collect::Reading> readings;
  std::vector<size_t> aliased;  // the rows with the label, in order
  for (size_t i = 0; i < rows->size(); ++i) {
    const PushedRow& row = (*rows)[i];
    if (row.labels_json.find("\"_device_alias\"") == std::string::npos) continue;
    Json labels = Json::parse(row.labels_json, nullptr, /*allow_exceptions=*/false);
    if (!labels.is_object()) continue;
    collect::Reading reading{row.t, row.device_id, row.metric_id, row.value, {}};
    for (auto it = labels.begin(); it != labels.end(); ++it) {
      std::string value;
      RenderJsonb(it.value(), &value);
      reading.labels.emplace_back(it.key(), std::move(value));
    }
    readings.push_back(std::move(reading));
    aliased.push_back(i);
  }
  if (readings.empty()) return;
  collect::AliasReadings(&readings);
  for (size_t k = 0; k < readings.size(); ++k) {
    collect::Reading& reading = readings[k];
    std::string labels = collect::LabelsText(std::move(reading.labels));
    if (k < aliased.size()) {
      (*rows)[aliased[k]].labels_json = std::move(labels);  // the original, without the alias
    } else {
      rows->push_back({std::move(reading.device_id), std::move(reading.metric_id),
                       std::move(labels), reading.time, reading.value});
    }
  }
}

Status PushedMetrics::Add(const std::string& site, const std::vector<PushedRow>& rows) {
  // Copy-on-write: a series being served keeps the samples it was given.
  std::map<Key, std::vector<simulate::RecordedSample>> added;
  for (const PushedRow& row : rows) {
    added[Key{site, row.device_id, row.metric_id, row.labels_json}].push_back({row.t, row.value});
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (rows_ + int64_t(rows.size()) > max_rows_) {
    return Status::Unavailable("the simulated server keeps at most " + std::to_string(max_rows_) +
                               " pushed rows in memory, and has " + std::to_string(rows_) +
                               "; nothing was stored (keep metrics in a store: kwatt serve "
                               "--store)");
  }
  for (auto& [key, samples] : added) {
    auto& slot = series_[key];
    auto merged = std::make_shared<std::vector<simulate::RecordedSample>>();
    if (slot) merged->reserve(slot->size() + samples.size());
    if (slot) *merged = *slot;
    // Stable: equal times keep the order they came in.
    std::stable_sort(samples.begin(), samples.end(),
                     [](const simulate::RecordedSample& a, const simulate::RecordedSample& b) {
                       return a.t < b.t;
                     });
    size_t middle = merged->size();
    merged->insert(merged->end(), samples.begin(), samples.end());
    std::inplace_merge(merged->begin(), merged->begin() + ptrdiff_t(middle), merged->end(),
                       [](const simulate::RecordedSample& a, const simulate::RecordedSample& b) {
                         return a.t < b.t;
                       });
    slot = std::move(merged);
  }
  rows_ += int64_t(rows.size());
  return Status::OK();
}

std::vector<simulate::OutputSeries> PushedMetrics::SeriesOf(
    const std::string& site, const std::string& device_id,
    const std::vector<std::string>& metrics) const {
  std::vector<simulate::OutputSeries> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = series_.lower_bound(Key{site, device_id, "", ""});
       it != series_.end() && std::get<0>(it->first) == site && std::get<1>(it->first) == device_id;
       ++it) {
    const std::string& metric = std::get<2>(it->first);
    if (!metrics.empty() && std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) {
      continue;
    }
    simulate::OutputSeries series;
    series.device_id = device_id;
    series.metric_id = metric;
    series.labels_json = std::get<3>(it->first);
    series.recorded = it->second;
    series.Derive();
    out.push_back(std::move(series));
  }
  return out;
}

int64_t PushedMetrics::rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rows_;
}

}  // namespace kwatt::server::internal

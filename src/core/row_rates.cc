#include "kwatt/core/row_rates.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kwatt/core/null_value.h"

namespace kwatt {

double SeriesRates::Next(std::string_view series, UnixNanos t, double value) {
  auto [at, first] = last_.try_emplace(std::string(series));
  Last& last = at->second;
  // PostgreSQL's order: NaN above every number; max() skips nulls and takes in the row itself.
  auto below = [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; };
  double highest = first ? NullValue() : last.highest;
  if (!IsNullValue(value) && (IsNullValue(highest) || below(highest, value))) highest = value;
  double rate = NullValue();
  if (!first && t != last.t && !IsNullValue(last.value) && !IsNullValue(value)) {
    const double seconds = double(t - last.t) / 1e9;
    rate = (below(value, last.value) ? highest - last.value + value : value - last.value) / seconds;
  }
  last = {t, value, highest};
  return rate;
}

void SeriesRates::Forget(const std::vector<std::string>& devices) {
  std::erase_if(last_, [&](const auto& entry) {
    const std::string_view device = std::string_view(entry.first).substr(0, entry.first.find('\n'));
    return std::find(devices.begin(), devices.end(), device) != devices.end();
  });
}

double SeriesRates::NextRow(const RowBatch& rows, size_t i, const StringInterner& interner) {
  key_.assign(interner.Get(rows.device[i]));
  (key_ += '\n') += interner.Get(rows.metric[i]);
  (key_ += '\n') += interner.Get(rows.labels[i]);
  return Next(key_, rows.time[i], rows.value[i]);
}

void SeriesRates::Apply(RowBatch* rows, const StringInterner& interner) {
  for (size_t i = 0; i < rows->size(); ++i) rows->value[i] = NextRow(*rows, i, interner);
  // Each row's text written anew from its fields (the value changed), as Kwollect renders it.
  rows->raw.clear();
  rows->raw_end.clear();
  std::string text;
  std::vector<uint32_t> ends;
  for (size_t i = 0; i < rows->size(); ++i) {
    AppendRowText(&text, *rows, i, interner);
    ends.push_back(uint32_t(text.size()));
  }
  rows->raw = std::move(text);
  rows->raw_end = std::move(ends);
}

}  // namespace kwatt

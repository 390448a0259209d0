#include "kwatt/core/row_table.h"

#include <cmath>
#include <string>

namespace kwatt {

Status RowTable::Begin(const RowsReport& resolved) {
  report = resolved;
  return Status::OK();
}

Status RowTable::Write(std::string_view site_name, const RowBatch& batch,
                       const StringInterner& interner) {
  Append(site_name, batch, interner, 0, batch.size());
  return Status::OK();
}

int32_t RowTable::Map(std::vector<Code>& map, uint32_t id, const StringInterner& from,
                      StringInterner& to) {
  if (id >= map.size()) map.resize(size_t(id) + 1);
  Code& code = map[id];
  if (code.epoch != epoch_) {
    // First use of `id` in this Append: the interner may not be the one the code was learnt from
    // (a new one at the same address), so the code holds only if it still names the same text.
    if (code.code < 0 || to.Get(uint32_t(code.code)) != from.Get(id)) {
      code.code = int32_t(to.Intern(from.Get(id)));
    }
    code.epoch = epoch_;
  }
  return code.code;
}

void RowTable::Append(std::string_view site_name, const RowBatch& batch,
                      const StringInterner& interner, size_t begin, size_t end) {
  ++epoch_;
  int32_t site_code = int32_t(sites.Intern(site_name));
  if (site_code != current_site_) {  // a device's node name depends on the site
    current_site_ = site_code;
    node_of_device_.clear();
  }
  bool has_raw = batch.raw_end.size() == batch.size();
  size_t n = end - begin, old = time.size();
  for (auto* column : {&site, &node, &device, &metric, &labels}) column->resize(old + n);
  time.insert(time.end(), batch.time.begin() + begin, batch.time.begin() + end);
  utc_offset.insert(utc_offset.end(), batch.utc_offset.begin() + begin,
                    batch.utc_offset.begin() + end);
  value.insert(value.end(), batch.value.begin() + begin, batch.value.begin() + end);
  kind.resize(old + n);
  for (size_t i = begin; i < end; ++i) {
    size_t o = old + i - begin;
    int32_t d = Map(device_map_, batch.device[i], interner, devices);
    site[o] = site_code;
    device[o] = d;
    metric[o] = Map(metric_map_, batch.metric[i], interner, metrics);
    labels[o] = Map(labels_map_, batch.labels[i], interner, label_texts);
    if (size_t(d) >= node_of_device_.size()) node_of_device_.resize(size_t(d) + 1, -1);
    if (node_of_device_[d] < 0) {
      node_of_device_[d] = int32_t(nodes.Intern(
          NodeName{std::string(devices.Get(uint32_t(d))), std::string(site_name)}.Fqdn()));
    }
    node[o] = node_of_device_[d];
    double v = batch.value[i];
    // The text is needed only when the value alone cannot tell (Kwollect writes every
    // non-integral float with a fraction or an exponent; NaN may have been null or "NaN").
    kind[o] = has_raw && (std::isnan(v) || v == std::floor(v)) ? RowValueKind(batch.RawRow(i))
                                                               : NumberKind(v);
  }
}

}  // namespace kwatt

#include "src/store/append_rules.h"

#include <string>

namespace kwatt::store::internal {

Status CheckAppendable(const RowBatch& batch, const StringInterner& interner) {
  for (size_t i = 0; i < batch.size(); ++i) {
    std::string_view device = interner.Get(batch.device[i]);
    std::string_view metric = interner.Get(batch.metric[i]);
    if (batch.time[i] % kNanosPerMicro != 0) {
      return Status::InvalidArgument("row " + std::to_string(i + 1) + " (" + std::string(device) +
                                     " " + std::string(metric) + " at " +
                                     FormatUtcTimestamp(batch.time[i]) +
                                     "): the store keeps instants to the microsecond; round the "
                                     "time first");
    }
    if (device.empty() || metric.empty()) {
      return Status::InvalidArgument("row " + std::to_string(i + 1) +
                                     ": an empty device or metric id");
    }
  }
  return Status::OK();
}

Result<Catalogue> ParseStoredCatalogue(const std::string& site, const std::string& cluster,
                                       std::string_view text) {
  Result<Catalogue> catalogue = Catalogue::FromJson(text);
  if (!catalogue.ok()) {
    return Status::Corruption("the store's catalogue of " + site + "/" + cluster + ": " +
                              catalogue.status().message());
  }
  return catalogue;
}

}  // namespace kwatt::store::internal

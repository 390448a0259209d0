// The rules every engine of the store shares, in one place: what it refuses in a batch to append
// (kwatt/store/store.h, Append) and how it reads a catalogue back. Internal to the store.
#ifndef KWATT_SRC_STORE_APPEND_RULES_H_
#define KWATT_SRC_STORE_APPEND_RULES_H_

#include <string>
#include <string_view>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"

namespace kwatt::store::internal {

// InvalidArgument naming the first row with a time finer than the microsecond, or an empty device
// or metric id; OK otherwise.
Status CheckAppendable(const RowBatch& batch, const StringInterner& interner);

// A catalogue read back from a store: Corruption naming the cluster when it does not parse.
Result<Catalogue> ParseStoredCatalogue(const std::string& site, const std::string& cluster,
                                       std::string_view text);

}  // namespace kwatt::store::internal

#endif  // KWATT_SRC_STORE_APPEND_RULES_H_

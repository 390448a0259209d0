// What every engine of the store refuses in a batch to append (kwatt/store/store.h, Append),
// checked in one place. Internal to the store.
#ifndef KWATT_SRC_STORE_APPEND_RULES_H_
#define KWATT_SRC_STORE_APPEND_RULES_H_

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"

namespace kwatt::store::internal {

// InvalidArgument naming the first row with a time finer than the microsecond, or an empty device
// or metric id; OK otherwise.
Status CheckAppendable(const RowBatch& batch, const StringInterner& interner);

}  // namespace kwatt::store::internal

#endif  // KWATT_SRC_STORE_APPEND_RULES_H_

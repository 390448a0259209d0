// The rules every engine of the store shares, in one place: what it refuses in a batch to append
// (kwatt/store/store.h, Append) and how it reads a catalogue back. Internal to the store.
#ifndef KWATT_SRC_STORE_APPEND_RULES_H_
#define KWATT_SRC_STORE_APPEND_RULES_H_

#include <optional>
#include <string>
#include <string_view>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/jobs/job.h"
#include "kwatt/store/store.h"

namespace kwatt::store::internal {

// InvalidArgument naming the first row with a time finer than the microsecond, or an empty device
// or metric id; OK otherwise.
Status CheckAppendable(const RowBatch& batch, const StringInterner& interner);

// InvalidArgument when a job to keep has a node or type that is empty or holds a control
// character (a newline would end a line of `kwatt jobs list`, and the embedded store keeps the
// lists one item a line), or a user with a control character, naming the job (the job to add,
// when its id is yet to be given) and the text; OK otherwise. Every engine keeps the same jobs.
Status CheckStorableJob(const jobs::Job& job);

// A catalogue read back from a store: Corruption naming the cluster when it does not parse.
Result<Catalogue> ParseStoredCatalogue(const std::string& site, const std::string& cluster,
                                       std::string_view text);

// An import's mark as the engines keep it, in their meta table: under "import KEY", the text
// "ROWS" while it goes on, "ROWS done" once complete.
std::string ImportMarkKey(const std::string& key);
std::string ImportMarkText(const ImportMark& mark);
// Corruption naming the key when the text is not a mark's.
Result<ImportMark> ParseImportMark(const std::string& key, std::string_view text);
// Unavailable unless `now` (the mark found in the transaction) is `from`: another import of the
// same archive is writing to the store.
Status CheckImportMarkIs(const std::string& key, const std::optional<ImportMark>& now,
                         const std::optional<ImportMark>& from);

}  // namespace kwatt::store::internal

#endif  // KWATT_SRC_STORE_APPEND_RULES_H_

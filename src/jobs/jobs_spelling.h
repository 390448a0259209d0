// "Did you mean": the known word nearest to a misspelt one, for the jobs file's messages (its
// keys, and the testbed's device ids its outages name). Internal; pure functions.
#ifndef KWATT_SRC_SERVER_JOBS_SPELLING_H_
#define KWATT_SRC_SERVER_JOBS_SPELLING_H_

#include <span>
#include <string>
#include <string_view>

namespace kwatt::server::internal {

// The word of `known` fewest edits (Levenshtein) away from `word`, when that is a plausible typo:
// at most 2 edits, fewer than `word` has letters, and no other word as near. Empty otherwise.
std::string NearestSpelling(std::string_view word, std::span<const std::string_view> known);

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_JOBS_SPELLING_H_

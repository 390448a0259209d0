// Small text helpers shared by the libraries and the CLI. Pure functions; thread-safe.
#ifndef KWATT_CORE_TEXT_H_
#define KWATT_CORE_TEXT_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kwatt {

// "a, b,,c" -> {"a", "b", "c"}: items of a comma-separated list, spaces and tabs around each
// removed, empty ones dropped (the form of Kwollect's `nodes` and `metrics` parameters).
std::vector<std::string> SplitCommaList(std::string_view text);

// True for the blanks around a field of the text kwatt reads: space, tab, CR and LF.
inline bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// `text` without its leading and trailing blanks (IsBlank).
inline std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

// Appends `field` as one CSV field (RFC 4180, as Python's csv module writes it): as it is, or in
// double quotes (inner quotes doubled) when it holds a comma, a quote or a line break.
void AppendCsvField(std::string* out, std::string_view field);

// Appends `value` as one CSV field: the shortest text that reads back to the same double (68.55,
// not 68.549999999999997; 98; 1e+20), as FormatJsonNumber (json_text.h) writes it; nothing (an
// empty field: unknown) when it is NaN or infinite.
void AppendCsvNumber(std::string* out, double value);

// Appends `value` as the value of a label in the Prometheus text exposition format, without the
// quotes around it: '\\', '"' and line feeds escaped as `\\`, `\"` and `\n`.
void AppendPrometheusLabelValue(std::string* out, std::string_view value);

// `text` as it may be printed on a terminal: the control characters that would drive it (C0 but
// line feed and tab, DEL, and C1 as UTF-8: ESC sequences that move the cursor, change the
// colours or the window's title) written as `\xNN` (C1: `\u009b`). Other text, UTF-8 included,
// is kept.
std::string ForTerminal(std::string_view text);

// Edits (insertions, deletions, substitutions: Levenshtein) that turn `a` into `b`, for the "did
// you mean" of messages.
size_t EditDistance(std::string_view a, std::string_view b);

// The word of `known` fewest edits away from `word`, when that is a plausible typo: at most 2
// edits, fewer than `word` has letters, and no other word as near. Empty otherwise.
std::string NearestSpelling(std::string_view word, std::span<const std::string_view> known);

// `text` as one word of a POSIX shell command: as it is when it holds only characters no shell
// treats specially (letters, digits and _ - . / : @ % + = ,), else in single quotes, an inner
// quote written '\''. Empty: ''. For commands shown to be copied (the dashboard's `kwatt
// backup`), whose parts may come from a request.
std::string ShellQuoted(std::string_view text);

// URLs and their credentials. An "http://user:password@host:port/path" URL's userinfo is what its
// authority (from "://" to the first '/', '?' or '#') holds before its LAST '@', so a password may
// itself hold '@' or ':'. kwatt never stores or shows credentials: they are moved out of a URL as
// soon as it is given (kwollect::SetApiUrl), and every URL that is stored or shown goes through
// UrlWithoutCredentials.

// The URL with its userinfo removed: "https://u:p@ss@api.example/stable" ->
// "https://api.example/stable". Text without "://" or without userinfo is returned unchanged.
std::string UrlWithoutCredentials(std::string_view url);

// The userinfo of such a URL, percent-decoded ("u%40x:p" -> "u@x", "p"); false when it has none.
// A userinfo without ':' is a username with an empty password.
bool UrlCredentials(std::string_view url, std::string* username, std::string* password);

// `text` with each "%XX" (two hexadecimal digits) replaced by the byte it codes; a '%' not followed
// by two hexadecimal digits is kept as it is.
std::string PercentDecode(std::string_view text);

}  // namespace kwatt

#endif  // KWATT_CORE_TEXT_H_

#include "kwatt/store/open_store.h"

#include <libpq-fe.h>

#include <cctype>
#include <string_view>

#include "kwatt/core/text.h"
#include "kwatt/store/postgres_store.h"
#include "kwatt/store/sqlite_store.h"

namespace kwatt::store {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool IsUri(std::string_view text) {
  return StartsWith(text, "postgresql://") || StartsWith(text, "postgres://");
}

// The keywords whose values are secrets (libpq's connection parameters).
bool IsSecretKeyword(std::string_view keyword) {
  return keyword == "password" || keyword == "sslpassword";
}

// True when `keyword` is one of libpq's connection parameters.
bool IsLibpqKeyword(std::string_view keyword) {
  PQconninfoOption* options = PQconndefaults();
  bool found = false;
  for (PQconninfoOption* option = options; option && option->keyword; ++option) {
    if (keyword == option->keyword) found = true;
  }
  PQconninfoFree(options);
  return found;
}

// A URI without its userinfo and with the values of its secret parameters replaced by "***".
std::string ShownUri(std::string_view uri) {
  std::string out = UrlWithoutCredentials(uri);
  size_t question = out.find('?');
  if (question == std::string::npos) return out;
  std::string shown = out.substr(0, question + 1);
  std::string_view query = std::string_view(out).substr(question + 1);
  while (true) {
    size_t amp = query.find('&');
    std::string_view parameter = query.substr(0, amp);
    size_t equals = parameter.find('=');
    if (equals != std::string_view::npos &&
        IsSecretKeyword(PercentDecode(parameter.substr(0, equals)))) {
      shown.append(parameter.substr(0, equals + 1)).append("***");
    } else {
      shown.append(parameter);
    }
    if (amp == std::string_view::npos) break;
    shown.push_back('&');
    query.remove_prefix(amp + 1);
  }
  return shown;
}

// libpq's key=value form (`host=db dbname=lab password='a b'`) with the values of its secret
// keywords replaced by "***". It is read as libpq reads it (conninfo_parse): a keyword, '='
// (spaces around it allowed), a value single-quoted (with \' and \\) or up to the next space
// (with \ escapes). Text that does not read so is not shown: it could hold a secret.
std::string ShownKeyValue(std::string_view text) {
  std::string shown;
  size_t i = 0;
  while (true) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (i == text.size()) return shown;
    size_t keyword_begin = i;
    while (i < text.size() && !IsSpace(text[i]) && text[i] != '=') ++i;
    std::string_view keyword = text.substr(keyword_begin, i - keyword_begin);
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (keyword.empty() || i == text.size() || text[i] != '=') {
      return shown + (shown.empty() ? "" : " ") + "...";
    }
    ++i;
    while (i < text.size() && IsSpace(text[i])) ++i;
    size_t value_begin = i;
    if (i < text.size() && text[i] == '\'') {
      for (++i; i < text.size() && text[i] != '\''; ++i) {
        if (text[i] == '\\') ++i;
      }
      if (i < text.size()) ++i;  // the closing quote
    } else {
      for (; i < text.size() && !IsSpace(text[i]); ++i) {
        if (text[i] == '\\') ++i;
      }
    }
    i = std::min(i, text.size());
    if (!shown.empty()) shown += ' ';
    shown.append(keyword).append("=");
    if (IsSecretKeyword(keyword)) {
      shown += "***";
    } else {
      shown.append(text.substr(value_begin, i - value_begin));
    }
  }
}

}  // namespace

bool IsPostgresUri(const std::string& uri) {
  if (IsUri(uri)) return true;
  // libpq's key=value form: its first word is one of libpq's keywords, then '='.
  size_t begin = 0;
  while (begin < uri.size() && IsSpace(uri[begin])) ++begin;
  size_t end = begin;
  while (end < uri.size() && !IsSpace(uri[end]) && uri[end] != '=') ++end;
  size_t equals = end;
  while (equals < uri.size() && IsSpace(uri[equals])) ++equals;
  return end > begin && equals < uri.size() && uri[equals] == '=' &&
         IsLibpqKeyword(std::string_view(uri).substr(begin, end - begin));
}

std::string ShownStoreUri(const std::string& uri) {
  if (IsUri(uri)) return ShownUri(uri);
  if (IsPostgresUri(uri)) return ShownKeyValue(uri);
  return uri;
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& uri, bool create) {
  if (uri.empty()) {
    return Status::InvalidArgument(
        "an empty store URI: give a file (the embedded store) or postgresql://HOST/DB");
  }
  if (IsPostgresUri(uri)) {
    PostgresStoreOptions options;
    options.create_if_missing = create;
    return OpenPostgresStore(uri, options);
  }
  SqliteStoreOptions options;
  options.create_if_missing = create;
  return OpenSqliteStore(uri, options);
}

}  // namespace kwatt::store

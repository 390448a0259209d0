#include "src/store/append_rules.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

#include "kwatt/core/json_text.h"

namespace kwatt::store::internal {

Status CheckStorableJob(const jobs::Job& job) {
  const std::string which = job.uid > 0 ? "job " + job.site + ":" + std::to_string(job.uid)
                                        : "the job to add on " + job.site;
  auto quoted = [](std::string_view text) {
    std::string out;
    AppendJsonString(&out, text);  // "monitor\nx": the control character seen
    return out;
  };
  auto control = [](std::string_view text) {
    return std::any_of(text.begin(), text.end(),
                       [](char c) { return (unsigned char)c < 0x20 || c == 0x7f; });
  };
  for (auto [list, what] : {std::pair{&job.nodes, "node"}, std::pair{&job.types, "type"}}) {
    for (const std::string& item : *list) {
      if (item.empty() || control(item)) {
        return Status::InvalidArgument(which + ": its " + what + " " + quoted(item) +
                                       (item.empty() ? " is empty" : " holds a control character") +
                                       ": give each one on its own, without newlines or tabs");
      }
    }
  }
  if (control(job.user)) {
    return Status::InvalidArgument(which + ": its user " + quoted(job.user) +
                                   " holds a control character (a newline, a tab): give the "
                                   "user's login");
  }
  return Status::OK();
}

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

std::string ImportMarkKey(const std::string& key) { return "import " + key; }

std::string ImportMarkText(const ImportMark& mark) {
  return std::to_string(mark.rows) + (mark.done ? " done" : "");
}

Result<ImportMark> ParseImportMark(const std::string& key, std::string_view text) {
  ImportMark mark;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mark.rows);
  std::string_view rest(end, size_t(text.data() + text.size() - end));
  if (ec != std::errc() || mark.rows < 0 || (rest != "" && rest != " done")) {
    return Status::Corruption("the store's mark of the import of " + key + " (\"" +
                              std::string(text.substr(0, 60)) + "\") is damaged");
  }
  mark.done = rest == " done";
  return mark;
}

Status CheckImportMarkIs(const std::string& key, const std::optional<ImportMark>& now,
                         const std::optional<ImportMark>& from) {
  if (now == from) return Status::OK();
  auto said = [](const std::optional<ImportMark>& mark) {
    return !mark ? std::string("no mark")
                 : std::to_string(mark->rows) + (mark->done ? " rows, done" : " rows");
  };
  return Status::Unavailable("another import of this archive (" + key +
                             ") is writing to the store: its mark says " + said(now) +
                             " where this import left " + said(from) +
                             "; let it finish, then run this command again");
}

}  // namespace kwatt::store::internal

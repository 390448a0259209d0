// Constants of the kwatt archive format (doc/archive_format.md), shared by writer and reader.
#ifndef KWATT_ARCHIVE_FORMAT_H_
#define KWATT_ARCHIVE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kwatt::archive {

inline constexpr std::string_view kFormatName = "kwatt-archive";
inline constexpr int kFormatVersion = 1;
inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kJournalName = "journal.jsonl";
inline constexpr std::string_view kDataDir = "data";
inline constexpr std::string_view kDataSuffix = ".jsonl.zst";
inline constexpr std::string_view kStateComplete = "complete";
inline constexpr std::string_view kStateIncomplete = "incomplete";
// The `query.api` of a `kwatt meter` recording (doc/archive_format.md, "Recordings").
inline constexpr std::string_view kRecordingApi = "kwatt meter";

// A frame closes before the first row at or after a boundary once it holds this much text.
inline constexpr size_t kFrameMinBytes = 1 << 20;
// No frame holds more text than this: a frame also closes before the first row of a new instant
// once it holds half of it. Readers refuse a frame header that announces more.
inline constexpr size_t kMaxFrameTextBytes = size_t(64) << 20;
// Boundaries: whole minutes since the epoch.
inline constexpr int64_t kFrameBoundaryNs = 60LL * 1'000'000'000;
// A recording's (kwatt meter's) boundaries: every 10 s, and a frame closes at each whatever its
// size (a meter writes a few rows a second), so that a meter killed or stopped by a full disk
// loses 10 s at most.
inline constexpr int64_t kRecordingFrameBoundaryNs = 10LL * 1'000'000'000;
inline constexpr int kZstdLevel = 3;

// "data/nova-1.lyon.grid5000.fr.jsonl.zst"
inline std::string NodeFileName(std::string_view node_fqdn) {
  return std::string(kDataDir) + "/" + std::string(node_fqdn) + std::string(kDataSuffix);
}
// "data/_other.lyon.jsonl.zst"
inline std::string OtherFileName(std::string_view site) {
  return std::string(kDataDir) + "/_other." + std::string(site) + std::string(kDataSuffix);
}

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_FORMAT_H_

#include "src/collect/snmp_device.h"

// clang-format off: net-snmp-config.h must come first.
#include <net-snmp/net-snmp-config.h>
#include <net-snmp/net-snmp-includes.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

namespace kwatt::collect {
namespace {

using Clock = std::chrono::steady_clock;
using Oid = std::vector<oid>;  // net-snmp's sub-identifiers (unsigned long here)

// An OID is at most 128 sub-identifiers (RFC 2578; net-snmp's MAX_OID_LEN).
constexpr size_t kMaxOidLength = MAX_OID_LEN;
// A walk stops with an error past this many entries (an agent that never ends its table).
constexpr size_t kMaxWalkEntries = 100000;

// The library's one-time set-up. snmp_sess_init() initialises the library on its first call
// (transports, request ids) without reading MIBs or configuration files; init_snmp() is never
// called: it would read the MIB directories and snmp.conf files, load persistent state under
// /var/lib/snmp and set the process's LC_CTYPE. The log handler "none" keeps the library from
// falling back to standard error.
void InitNetSnmp() {
  static std::once_flag once;
  std::call_once(once, [] {
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_READ_CONFIGS, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DONT_PERSIST_STATE, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_LOAD, 1);
    netsnmp_ds_set_boolean(NETSNMP_DS_LIBRARY_ID, NETSNMP_DS_LIB_DISABLE_PERSISTENT_SAVE, 1);
    netsnmp_register_loghandler(NETSNMP_LOGHANDLER_NONE, LOG_EMERG);
    netsnmp_session unused;
    snmp_sess_init(&unused);
  });
}

struct PduDeleter {
  void operator()(netsnmp_pdu* pdu) const {
    if (pdu) snmp_free_pdu(pdu);
  }
};
using PduPtr = std::unique_ptr<netsnmp_pdu, PduDeleter>;

std::string_view Trim(std::string_view text) {
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

// Dot-separated decimal sub-identifiers, each at most 2^32 - 1 (no leading or trailing dot).
Status ParseComponents(std::string_view text, std::vector<uint32_t>* out) {
  if (text.empty()) return Status::InvalidArgument("an empty OID");
  size_t start = 0;
  int index = 1;
  while (true) {
    size_t dot = text.find('.', start);
    std::string_view part =
        text.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty()) return Status::InvalidArgument("an empty component " + std::to_string(index));
    uint64_t value = 0;
    for (char c : part) {
      if (c < '0' || c > '9') {
        return Status::InvalidArgument("component " + std::to_string(index) + " '" +
                                       std::string(part) + "' is not a number");
      }
      value = value * 10 + static_cast<uint64_t>(c - '0');
      if (value > 0xFFFFFFFFull) {
        return Status::InvalidArgument("component " + std::to_string(index) + " '" +
                                       std::string(part) + "' is above 4294967295");
      }
    }
    out->push_back(static_cast<uint32_t>(value));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
    ++index;
  }
  if (out->size() > kMaxOidLength) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxOidLength) + " components");
  }
  return Status::OK();
}

// A whole OID: a leading '.' accepted, at least two components.
Status ParseOid(std::string_view text, std::vector<uint32_t>* out) {
  std::string quoted = "'" + std::string(text) + "'";
  if (!text.empty() && text.front() == '.') text.remove_prefix(1);
  Status status = ParseComponents(text, out);
  if (!status.ok()) {
    return Status::InvalidArgument(quoted + " is not a numeric OID (" + status.message() + ")");
  }
  if (out->size() < 2) {
    return Status::InvalidArgument(quoted + " is not a numeric OID (fewer than 2 components)");
  }
  return Status::OK();
}

Oid ToOid(const std::vector<uint32_t>& components) {
  return Oid(components.begin(), components.end());
}

std::string OidText(const oid* name, size_t length) {
  std::string text;
  for (size_t i = 0; i < length; ++i) {
    if (i) text += '.';
    text += std::to_string(name[i]);
  }
  return text;
}

bool StartsWith(const oid* name, size_t length, const Oid& prefix) {
  return length > prefix.size() && std::equal(prefix.begin(), prefix.end(), name);
}

// A varbind's value: a number, a text, or nothing (noSuchObject, noSuchInstance, endOfMibView,
// NULL, a type kwatt does not read). `text` is also set for integers (their exact decimal text,
// what a template compares).
struct Value {
  enum class Kind { kNone, kNumber, kText } kind = Kind::kNone;
  double number = 0;
  std::string text;
};

uint64_t Counter64Of(const struct counter64* value) {
  return (static_cast<uint64_t>(value->high & 0xFFFFFFFFul) << 32) |
         static_cast<uint64_t>(value->low & 0xFFFFFFFFul);
}

Value ValueOf(const netsnmp_variable_list& variable) {
  Value value;
  auto number = [&](auto n) {
    value.kind = Value::Kind::kNumber;
    value.number = static_cast<double>(n);
    value.text = std::to_string(n);
  };
  switch (variable.type) {
    case ASN_INTEGER:
      if (variable.val.integer) number(static_cast<long long>(*variable.val.integer));
      break;
    case ASN_GAUGE:  // also Unsigned32
    case ASN_COUNTER:
    case ASN_TIMETICKS:
    case ASN_UINTEGER:
      if (variable.val.integer) {
        number(static_cast<unsigned long long>(static_cast<unsigned long>(*variable.val.integer) &
                                               0xFFFFFFFFul));
      }
      break;
    case ASN_COUNTER64:
#ifdef NETSNMP_WITH_OPAQUE_SPECIAL_TYPES
    case ASN_OPAQUE_COUNTER64:
    case ASN_OPAQUE_U64:
#endif
      if (variable.val.counter64) {
        number(static_cast<unsigned long long>(Counter64Of(variable.val.counter64)));
      }
      break;
#ifdef NETSNMP_WITH_OPAQUE_SPECIAL_TYPES
    case ASN_OPAQUE_I64:
      if (variable.val.counter64) {
        number(static_cast<long long>(Counter64Of(variable.val.counter64)));
      }
      break;
    case ASN_OPAQUE_FLOAT:
      if (variable.val.floatVal) {
        value.kind = Value::Kind::kNumber;
        value.number = *variable.val.floatVal;
      }
      break;
    case ASN_OPAQUE_DOUBLE:
      if (variable.val.doubleVal) {
        value.kind = Value::Kind::kNumber;
        value.number = *variable.val.doubleVal;
      }
      break;
#endif
    case ASN_OCTET_STR:
      value.kind = Value::Kind::kText;
      if (variable.val.string) {
        value.text.assign(reinterpret_cast<const char*>(variable.val.string), variable.val_len);
      }
      break;
    case ASN_IPADDRESS:
      if (variable.val.string && variable.val_len == 4) {
        value.kind = Value::Kind::kText;
        for (int i = 0; i < 4; ++i) {
          if (i) value.text += '.';
          value.text += std::to_string(variable.val.string[i]);
        }
      }
      break;
    case ASN_OBJECT_ID:
      if (variable.val.objid) {
        value.kind = Value::Kind::kText;
        value.text = OidText(variable.val.objid, variable.val_len / sizeof(oid));
      }
      break;
    default:  // SNMP_NOSUCHOBJECT, SNMP_NOSUCHINSTANCE, SNMP_ENDOFMIBVIEW, ASN_NULL, others
      break;
  }
  return value;
}

// Why a varbind holds no value, as SNMP names it.
std::string NoValueName(u_char type) {
  switch (type) {
    case SNMP_NOSUCHOBJECT:
      return "noSuchObject";
    case SNMP_NOSUCHINSTANCE:
      return "noSuchInstance";
    case SNMP_ENDOFMIBVIEW:
      return "endOfMibView";
    case ASN_NULL:
      return "NULL";
    default:
      return "a value of ASN.1 type " + std::to_string(int(type)) + ", which kwatt does not read";
  }
}

std::string ErrorStatusName(long status) {
  const char* text = snmp_errstring(static_cast<int>(status));
  return text ? std::string(text) : "error status " + std::to_string(status);
}

class SnmpDevice final : public Device {
 public:
  SnmpDevice(std::vector<MetricDescription> metrics, std::vector<SnmpPath> paths,
             SnmpOptions options)
      : metrics_(std::move(metrics)), paths_(std::move(paths)), options_(options) {
    const MetricUrl& url = metrics_.front().url;
    MetricUrl device_url = url;  // the device, not one metric's OID
    device_url.path.clear();
    device_url.query.clear();
    name_ = "SNMP device " + device_url.Redacted();
    community_ = url.user;
    std::string host = url.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    int port = url.port != 0 ? url.port : 161;
    peer_ = (host.find(':') != std::string::npos ? "udp6:[" + host + "]:" : "udp:" + host + ":") +
            std::to_string(port);
    resolved_.resize(metrics_.size());
    for (size_t i = 0; i < paths_.size(); ++i) {
      if (paths_[i].has_template) {
        has_templates_ = true;
      } else {
        resolved_[i] = ToOid(paths_[i].oid);
      }
    }
  }

  ~SnmpDevice() override {
    if (session_) snmp_sess_close(session_);
  }

  Status Poll(const PollRequest& request, std::vector<Reading>* out) override {
    if (request.active.size() != metrics_.size()) {
      return Status::Internal(name_ + ": a poll of " + std::to_string(request.active.size()) +
                              " metrics for a device of " + std::to_string(metrics_.size()));
    }
    KWATT_RETURN_IF_ERROR(Open());
    if (has_templates_ && !walked_) KWATT_RETURN_IF_ERROR(Resolve(request.deadline));

    // The OIDs to read, each once, with the metrics it feeds, in the descriptions' order.
    std::vector<Wanted> wanted;
    std::map<Oid, size_t> index;
    for (size_t i = 0; i < metrics_.size(); ++i) {
      if (!request.active[i] || !resolved_[i]) continue;
      auto [it, added] = index.emplace(*resolved_[i], wanted.size());
      if (added) wanted.push_back(Wanted{*resolved_[i], {}});
      wanted[it->second].metrics.push_back(i);
    }
    std::vector<Reading> readings;
    size_t step = static_cast<size_t>(std::max(1, options_.max_oids_per_request));
    for (size_t begin = 0; begin < wanted.size(); begin += step) {
      size_t end = std::min(wanted.size(), begin + step);
      KWATT_RETURN_IF_ERROR(Get(wanted, begin, end, request, &readings));
    }
    for (Reading& reading : readings) out->push_back(std::move(reading));
    return Status::OK();
  }

  Status Refresh() override {
    if (!has_templates_) return Status::OK();
    KWATT_RETURN_IF_ERROR(Open());
    return Resolve(Clock::now() + options_.refresh_timeout);
  }

 private:
  struct Wanted {
    Oid name;
    std::vector<size_t> metrics;  // indices into metrics_
  };
  // A walked table: each entry's OID after the prefix, and its value's text.
  using Table = std::vector<std::pair<Oid, std::string>>;

  Status Open() {
    if (session_) return Status::OK();
    InitNetSnmp();
    netsnmp_session settings;
    snmp_sess_init(&settings);
    settings.version = SNMP_VERSION_2c;
    settings.peername = peer_.data();
    settings.community = reinterpret_cast<u_char*>(community_.data());
    settings.community_len = community_.size();
    settings.retries = 0;
    settings.timeout = 1000000;  // replaced before each request
    session_ = snmp_sess_open(&settings);
    if (!session_) {
      int system_errno = 0, snmp_errno_value = 0;
      char* text = nullptr;
      snmp_error(&settings, &system_errno, &snmp_errno_value, &text);
      std::string message = Scrub(text ? text : "unknown error");
      std::free(text);
      return Status::Unavailable(name_ + ": cannot open an SNMP session: " + message);
    }
    return Status::OK();
  }

  // net-snmp's own messages name the peer, never the community; scrubbed all the same.
  std::string Scrub(std::string text) const {
    if (community_.empty()) return text;
    for (size_t at = text.find(community_); at != std::string::npos;
         at = text.find(community_, at + 3)) {
      text.replace(at, community_.size(), "***");
    }
    return text;
  }

  // Sends `pdu` (owned) and waits for its answer until `deadline`, without retries.
  Result<PduPtr> Send(netsnmp_pdu* pdu, Clock::time_point deadline, const std::string& what) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      snmp_free_pdu(pdu);
      return Status::Unavailable(name_ + ": " + what + " timed out (the poll's deadline passed)");
    }
    netsnmp_session* session = snmp_sess_session(session_);
    session->timeout = static_cast<long>(left.count());
    session->retries = 0;
    netsnmp_pdu* answer = nullptr;
    int status = snmp_sess_synch_response(session_, pdu, &answer);  // takes `pdu`
    PduPtr response(answer);
    if (status == STAT_TIMEOUT) {
      return Status::Unavailable(name_ + ": " + what + " timed out after " +
                                 std::to_string((left.count() + 500) / 1000) +
                                 " ms without an answer (the agent is down or unreachable, or "
                                 "does not accept the community: a v2c agent ignores a wrong one)");
    }
    if (status != STAT_SUCCESS || !response) {
      int system_errno = 0, snmp_errno_value = 0;
      char* text = nullptr;
      snmp_sess_error(session_, &system_errno, &snmp_errno_value, &text);
      std::string message = Scrub(text ? text : "unknown error");
      std::free(text);
      return Status::Unavailable(name_ + ": " + what + " failed: " + message);
    }
    return response;
  }

  // GETs wanted[begin, end) and appends their readings; a tooBig answer is asked in halves.
  Status Get(const std::vector<Wanted>& wanted, size_t begin, size_t end,
             const PollRequest& request, std::vector<Reading>* readings) {
    netsnmp_pdu* pdu = snmp_pdu_create(SNMP_MSG_GET);
    for (size_t i = begin; i < end; ++i) {
      snmp_add_null_var(pdu, wanted[i].name.data(), wanted[i].name.size());
    }
    std::string what =
        "GET of " + std::to_string(end - begin) + " OID" +
        (end - begin == 1 ? " " + OidText(wanted[begin].name.data(), wanted[begin].name.size())
                          : "s");
    KWATT_ASSIGN_OR_RETURN(PduPtr response, Send(pdu, request.deadline, what));
    if (response->errstat == SNMP_ERR_TOOBIG && end - begin > 1) {
      size_t middle = begin + (end - begin) / 2;
      KWATT_RETURN_IF_ERROR(Get(wanted, begin, middle, request, readings));
      return Get(wanted, middle, end, request, readings);
    }
    if (response->errstat != SNMP_ERR_NOERROR) {
      std::string at;
      long index = response->errindex;
      if (index >= 1 && static_cast<size_t>(index) <= end - begin) {
        const Oid& name = wanted[begin + index - 1].name;
        at = " at " + OidText(name.data(), name.size());
      }
      return Status::Unavailable(name_ + ": " + what + ": the agent answered " +
                                 ErrorStatusName(response->errstat) + at);
    }
    size_t position = begin;
    for (netsnmp_variable_list* variable = response->variables; variable;
         variable = variable->next_variable, ++position) {
      // An answer lists the OIDs asked in their order; one that does not is matched by name.
      const Wanted* target = nullptr;
      if (position < end &&
          netsnmp_oid_equals(variable->name, variable->name_length, wanted[position].name.data(),
                             wanted[position].name.size()) == 0) {
        target = &wanted[position];
      } else {
        for (size_t i = begin; i < end && !target; ++i) {
          if (netsnmp_oid_equals(variable->name, variable->name_length, wanted[i].name.data(),
                                 wanted[i].name.size()) == 0) {
            target = &wanted[i];
          }
        }
      }
      if (!target) continue;  // an OID not asked for
      Value value = ValueOf(*variable);
      if (value.kind == Value::Kind::kNone) {
        NoteProblem(PollProblem::Kind::kMissingValue,
                    name_ + ": no value for the OID " +
                        OidText(target->name.data(), target->name.size()) + " (" +
                        NoValueName(variable->type) + "): check the OID");
        continue;
      }
      for (size_t metric : target->metrics) {
        if (value.kind == Value::Kind::kNumber) {
          readings->push_back(ReadingOf(metrics_[metric], request.sent_at, value.number));
        } else if (value.kind == Value::Kind::kText) {
          readings->push_back(ReadingOf(metrics_[metric], request.sent_at, value.text));
        }
      }
    }
    return Status::OK();
  }

  // Walks `prefix` with GETBULK until the first OID outside it.
  Status Walk(const Oid& prefix, Clock::time_point deadline, Table* table) {
    Oid next = prefix;
    std::string what = "walk of " + OidText(prefix.data(), prefix.size());
    while (true) {
      netsnmp_pdu* pdu = snmp_pdu_create(SNMP_MSG_GETBULK);
      pdu->non_repeaters = 0;
      pdu->max_repetitions = std::max(1, options_.walk_repetitions);
      snmp_add_null_var(pdu, next.data(), next.size());
      KWATT_ASSIGN_OR_RETURN(PduPtr response, Send(pdu, deadline, what));
      if (response->errstat != SNMP_ERR_NOERROR) {
        return Status::Unavailable(name_ + ": " + what + ": the agent answered " +
                                   ErrorStatusName(response->errstat));
      }
      bool more = false;
      for (netsnmp_variable_list* variable = response->variables; variable;
           variable = variable->next_variable) {
        more = false;
        if (variable->type == SNMP_ENDOFMIBVIEW ||
            !StartsWith(variable->name, variable->name_length, prefix)) {
          break;
        }
        if (snmp_oid_compare(variable->name, variable->name_length, next.data(), next.size()) <=
            0) {
          return Status::Unavailable(name_ + ": " + what + ": the agent answered " +
                                     OidText(variable->name, variable->name_length) +
                                     ", not after " + OidText(next.data(), next.size()));
        }
        next.assign(variable->name, variable->name + variable->name_length);
        Value value = ValueOf(*variable);
        if (value.kind != Value::Kind::kNone) {
          table->emplace_back(Oid(next.begin() + prefix.size(), next.end()), value.text);
        }
        more = true;
      }
      if (!more) return Status::OK();
      if (table->size() > kMaxWalkEntries) {
        return Status::Unavailable(name_ + ": " + what + ": more than " +
                                   std::to_string(kMaxWalkEntries) + " entries");
      }
    }
  }

  // Walks each template's prefix (once per prefix) and resolves every template; on an error,
  // the previous resolutions are kept.
  Status Resolve(Clock::time_point deadline) {
    std::map<Oid, Table> tables;
    for (const SnmpPath& path : paths_) {
      if (!path.has_template) continue;
      Oid prefix = ToOid(path.template_prefix);
      if (tables.count(prefix)) continue;
      Table table;
      KWATT_RETURN_IF_ERROR(Walk(prefix, deadline, &table));
      tables.emplace(std::move(prefix), std::move(table));
    }
    for (size_t i = 0; i < paths_.size(); ++i) {
      const SnmpPath& path = paths_[i];
      if (!path.has_template) continue;
      const Table& table = tables.at(ToOid(path.template_prefix));
      auto match = std::find_if(table.begin(), table.end(), [&](const auto& entry) {
        return entry.second == path.template_value;
      });
      resolved_[i].reset();
      if (match == table.end()) continue;
      Oid name = ToOid(path.oid);
      name.insert(name.end(), match->first.begin(), match->first.end());
      name.insert(name.end(), path.after.begin(), path.after.end());
      if (name.size() <= kMaxOidLength) resolved_[i] = std::move(name);
    }
    walked_ = true;
    return Status::OK();
  }

  std::vector<MetricDescription> metrics_;
  std::vector<SnmpPath> paths_;
  SnmpOptions options_;
  std::string name_;       // "SNMP device snmp://***@HOST:PORT/"
  std::string community_;  // a credential: never in a message
  std::string peer_;       // net-snmp's peer name: "udp:HOST:PORT"
  bool has_templates_ = false;
  bool walked_ = false;                       // a walk of the templates succeeded once
  std::vector<std::optional<Oid>> resolved_;  // per metric: the OID read (none: unresolved)
  void* session_ = nullptr;                   // net-snmp's single-session handle
};

}  // namespace

std::string OidText(const std::vector<uint32_t>& oid) {
  std::string text;
  for (size_t i = 0; i < oid.size(); ++i) {
    if (i) text += '.';
    text += std::to_string(oid[i]);
  }
  return text;
}

Result<SnmpPath> ParseSnmpPath(std::string_view path) {
  SnmpPath parsed;
  size_t open = path.find("{{");
  size_t close = path.find("}}");
  if (open == std::string_view::npos) {
    if (close != std::string_view::npos) {
      return Status::InvalidArgument("'" + std::string(path) + "' has '}}' without '{{'");
    }
    KWATT_RETURN_IF_ERROR(ParseOid(path, &parsed.oid));
    return parsed;
  }
  std::string quoted = "'" + std::string(path) + "'";
  if (close == std::string_view::npos || close < open) {
    return Status::InvalidArgument(quoted + ": a template '{{' is not closed by '}}'");
  }
  if (path.find("{{", open + 2) != std::string_view::npos ||
      path.find("}}", close + 2) != std::string_view::npos) {
    return Status::InvalidArgument(quoted + " has more than one template");
  }
  parsed.has_template = true;
  std::string_view before = path.substr(0, open);
  std::string_view inside = path.substr(open + 2, close - open - 2);
  std::string_view after = path.substr(close + 2);
  if (before.empty() || before.back() != '.') {
    return Status::InvalidArgument(quoted +
                                   ": a template must follow a numeric OID and a '.' (e.g. "
                                   "1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == eth0 }})");
  }
  before.remove_suffix(1);
  Status status = ParseOid(before, &parsed.oid);
  if (!status.ok())
    return Status::InvalidArgument(quoted + ": before the template, " + status.message());
  size_t equals = inside.find("==");
  if (equals == std::string_view::npos) {
    return Status::InvalidArgument(quoted + ": the template is not {{ PREFIX == VALUE }}");
  }
  status = ParseOid(Trim(inside.substr(0, equals)), &parsed.template_prefix);
  if (!status.ok()) {
    return Status::InvalidArgument(quoted + ": the template's prefix " + status.message());
  }
  parsed.template_value = std::string(Trim(inside.substr(equals + 2)));
  if (!after.empty()) {
    if (after.front() != '.') {
      return Status::InvalidArgument(quoted + ": after the template, a '.' and numbers expected");
    }
    status = ParseComponents(after.substr(1), &parsed.after);
    if (!status.ok()) {
      return Status::InvalidArgument(quoted + ": after the template, " + status.message());
    }
  }
  return parsed;
}

Result<std::unique_ptr<Device>> MakeSnmpDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment) {
  return MakeSnmpDevice(metrics, environment, SnmpOptions());
}

Result<std::unique_ptr<Device>> MakeSnmpDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& /*environment*/,
                                               const SnmpOptions& options) {
  if (metrics.empty()) return Status::InvalidArgument("an SNMP device without metrics");
  const MetricUrl& first = metrics.front().url;
  std::vector<SnmpPath> paths;
  for (const MetricDescription& metric : metrics) {
    const MetricUrl& url = metric.url;
    if (url.scheme != "snmp") {
      return Status::InvalidArgument(metric.origin + ": url: scheme '" + url.scheme +
                                     "' is not snmp");
    }
    if (url.user.empty()) {
      return Status::InvalidArgument(metric.origin + ": url: " + url.Redacted() +
                                     " has no community (snmp://COMMUNITY@HOST/OID)");
    }
    if (url.host != first.host || url.port != first.port || url.user != first.user) {
      return Status::InvalidArgument(metric.origin + ": url: " + url.Redacted() +
                                     " is not the device of " + metrics.front().origin + " (" +
                                     first.Redacted() + ")");
    }
    Result<SnmpPath> path = ParseSnmpPath(url.path);
    if (!path.ok()) {
      return Status::InvalidArgument(metric.origin + ": url: path " + path.status().message());
    }
    paths.push_back(std::move(path).value());
  }
  return std::unique_ptr<Device>(new SnmpDevice(metrics, std::move(paths), options));
}

}  // namespace kwatt::collect

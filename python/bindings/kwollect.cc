// kwatt._core's Kwollect client: fetch() into a Table, look_up_nodes(), resolve(), node_fqdn(),
// and the client options and queries every part's bindings build from Python arguments.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/node_name.h"
#include "kwatt/core/row_table.h"
#include "kwatt/core/text.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"
#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {

namespace {

// The options of `given` over `options`, the config file's name aside; raises on an unknown one.
void ApplyClientOptions(const py::dict& given, kwollect::ClientOptions* options) {
  std::optional<std::string> api_url;
  for (auto [key_handle, value] : given) {
    std::string key = key_handle.cast<std::string>();
    if (value.is_none() || key == "config") continue;
    if (key == "api_url")
      api_url = value.cast<std::string>();
    else if (key == "username")
      options->username = value.cast<std::string>();
    else if (key == "password")
      options->password = value.cast<std::string>();
    else if (key == "verify_tls")
      options->verify_tls = value.cast<bool>();
    else if (key == "ca_file")
      options->ca_file = value.cast<std::string>();
    else if (key == "timeout")
      options->timeout_s = value.cast<double>();
    else if (key == "connect_timeout")
      options->connect_timeout_s = value.cast<double>();
    else if (key == "concurrency")
      options->max_concurrency = value.cast<int>();
    else if (key == "per_site")
      options->max_per_site = value.cast<int>();
    else if (key == "rows_per_request")
      options->max_rows_per_request = value.cast<int64_t>();
    else if (key == "retries")
      options->max_retries = value.cast<int>();
    else if (key == "backoff")
      options->backoff_s = value.cast<double>();
    else
      Throw(Status::InvalidArgument("unknown client option \"" + key + "\""));
  }
  // Last, so that a username given as an option wins over the URL's.
  if (api_url) kwollect::SetApiUrl(*api_url, options);
}

}  // namespace

kwollect::ClientOptions MakeClientOptions(const py::dict& given) {
  kwollect::ClientOptions options;
  std::string config = given.contains("config") && !given["config"].is_none()
                           ? given["config"].cast<std::string>()
                           : kwollect::DefaultConfigPath();
  Check(kwollect::LoadClientOptions(config, &options));
  ApplyClientOptions(given, &options);
  return options;
}

Client::Client(const py::dict& given) : given_(py::dict(given.attr("copy")())) {
  kwollect::ClientOptions probe;  // the defaults, and those given
  ApplyClientOptions(given_, &probe);
  Check(kwollect::ValidateClientOptions(probe));
  shown_api_ = UrlWithoutCredentials(probe.api_url);
}

const kwollect::ClientOptions& Client::Options() {
  if (!options_) {
    kwollect::ClientOptions options = MakeClientOptions(given_);
    Check(kwollect::ValidateClientOptions(options));
    options_ = std::move(options);
  }
  return *options_;
}

std::vector<NodeName> ParseNodes(const std::vector<std::string>& names) {
  std::vector<NodeName> nodes;
  for (const std::string& name : names) {
    NodeName node = Unwrap(ParseNodeName(name));
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  return nodes;
}

// A query from keyword arguments: nodes (names), start, end (int ns), job ((site, id)),
// metrics, summary.
kwollect::FetchQuery MakeQuery(const std::vector<std::string>& nodes, std::optional<int64_t> start,
                               std::optional<int64_t> end,
                               std::optional<std::pair<std::string, int64_t>> job,
                               const std::vector<std::string>& metrics, bool summary) {
  kwollect::FetchQuery query;
  query.nodes = ParseNodes(nodes);
  query.start = start;
  query.end = end;
  if (job) query.job = kwollect::JobRef{job->first, job->second};
  query.metrics = metrics;
  query.summary = summary;
  return query;
}

py::dict RowsReportDict(const RowsReport& r) {
  py::dict d;
  py::list nodes;
  for (const auto& node : r.nodes) nodes.append(node.Fqdn());
  d["nodes"] = nodes;
  d["start"] = r.start;
  d["end"] = r.end;
  d["job_types"] = r.job_types;
  py::dict catalogues;
  for (const ClusterCatalogue& c : r.catalogues) catalogues[py::str(c.cluster)] = c.catalogue;
  d["catalogues"] = catalogues;
  d["requests"] = r.requests;
  d["retries"] = r.retries;
  d["splits"] = r.splits;
  d["rows"] = r.rows;
  d["bytes"] = r.bytes;
  d["seconds"] = r.seconds;
  py::list failures;
  for (const auto& f : r.failures) {
    py::dict fd;
    fd["site"] = f.site;
    fd["nodes"] = f.nodes;
    fd["start"] = f.start;
    fd["end"] = f.end;
    fd["metrics"] = f.metrics;
    fd["error"] = f.error.message();
    failures.append(fd);
  }
  d["failures"] = failures;
  d["complete"] = r.complete();
  return d;
}

namespace {

std::shared_ptr<RowTable> FetchTable(Client& client, const std::vector<std::string>& nodes,
                                     std::optional<int64_t> start, std::optional<int64_t> end,
                                     std::optional<std::pair<std::string, int64_t>> job,
                                     const std::vector<std::string>& metrics, bool summary,
                                     py::object progress, bool check_metrics, bool as_rate) {
  const kwollect::ClientOptions& options = client.Options();
  kwollect::FetchQuery query = MakeQuery(nodes, start, end, job, metrics, summary);
  query.check_metrics = check_metrics;
  query.as_rate = as_rate;
  auto table = std::make_shared<RowTable>();
  Watch watch{std::move(progress)};
  Result<RowsReport> report = Status::OK();
  {
    py::gil_scoped_release release;
    report = kwollect::Fetch(options, query, table.get(), watch.Callback());
  }
  watch.RaiseIfInterrupted();
  table->report = Unwrap(std::move(report));
  table->complete = table->report.complete();
  return table;
}

py::dict LookUp(Client& client, const std::vector<std::string>& names) {
  const kwollect::ClientOptions& options = client.Options();
  std::vector<NodeName> nodes;
  py::list problems;
  std::vector<std::string> parsed_names;
  for (const std::string& name : names) {
    Result<NodeName> node = ParseNodeName(name);
    if (!node.ok()) {
      problems.append(py::make_tuple(name, node.status().message()));
      continue;
    }
    nodes.push_back(*node);
    parsed_names.push_back(name);
  }
  Result<kwollect::NodeLookup> lookup = Status::OK();
  {
    py::gil_scoped_release release;
    lookup = kwollect::LookUpNodes(options, nodes);
  }
  kwollect::NodeLookup found = Unwrap(std::move(lookup));
  py::list known, unavailable;
  for (size_t i = 0; i < found.nodes.size(); ++i) {
    const kwollect::NodeInfo& info = found.nodes[i];
    if (info.unavailable) {  // its site's API could not be read: unchecked, not wrong
      unavailable.append(py::make_tuple(parsed_names[i], info.problem));
      continue;
    }
    if (!info.problem.empty()) {
      problems.append(py::make_tuple(parsed_names[i], info.problem));
      continue;
    }
    py::dict d;
    d["name"] = parsed_names[i];
    d["node"] = info.node.Fqdn();
    d["uid"] = info.node.uid;
    d["site"] = info.node.site;
    d["cluster"] = info.cluster;
    const Catalogue* catalogue = found.CatalogueOf(info.node);
    d["catalogue"] = catalogue ? *catalogue : Catalogue();
    known.append(d);
  }
  // No site could be read (the API unreachable, down): that is the error, not a warning.
  auto down = std::find_if(found.nodes.begin(), found.nodes.end(),
                           [](const kwollect::NodeInfo& info) { return info.unavailable; });
  if (down != found.nodes.end() && known.empty() && problems.empty()) {
    Unwrap(Result<int>(Status::Unavailable(down->problem)));
  }
  py::dict out;
  out["nodes"] = known;
  out["problems"] = problems;
  out["unavailable"] = unavailable;
  return out;
}

py::dict ResolveQuery(Client& client, const std::vector<std::string>& nodes,
                      std::optional<int64_t> start, std::optional<int64_t> end,
                      std::optional<std::pair<std::string, int64_t>> job) {
  const kwollect::ClientOptions& options = client.Options();
  kwollect::FetchQuery query = MakeQuery(nodes, start, end, job, {}, false);
  Result<RowsReport> report = Status::OK();
  {
    py::gil_scoped_release release;
    report = kwollect::Resolve(options, query);
  }
  return RowsReportDict(Unwrap(std::move(report)));
}

}  // namespace

void RegisterKwollect(py::module_& m) {
  py::class_<Client>(
      m, "Client",
      "The Kwollect client's options, checked when made (an unknown option, or one without a "
      "meaning, raises InvalidArgumentError): api_url, username, password, verify_tls, ca_file, "
      "timeout, connect_timeout, concurrency, per_site, rows_per_request, retries, backoff, over "
      "those of the credentials file (config, else ~/.python-grid5000.yaml), read when a request "
      "first needs them")
      .def(py::init<const py::dict&>(), py::arg("options") = py::dict())
      .def_property_readonly(
          "api_url", [](Client& c) { return UrlWithoutCredentials(c.Options().api_url); },
          "The API's base URL, without credentials")
      .def_property_readonly("username", [](Client& c) { return c.Options().username; })
      .def_property_readonly("verify_tls", [](Client& c) { return c.Options().verify_tls; })
      .def_property_readonly("timeout", [](Client& c) { return c.Options().timeout_s; })
      .def_property_readonly("connect_timeout",
                             [](Client& c) { return c.Options().connect_timeout_s; })
      .def_property_readonly("concurrency", [](Client& c) { return c.Options().max_concurrency; })
      .def_property_readonly("per_site", [](Client& c) { return c.Options().max_per_site; })
      .def_property_readonly("rows_per_request",
                             [](Client& c) { return c.Options().max_rows_per_request; })
      .def_property_readonly("retries", [](Client& c) { return c.Options().max_retries; })
      .def_property_readonly("backoff", [](Client& c) { return c.Options().backoff_s; })
      .def("__repr__",
           [](const Client& c) { return "<kwatt._core.Client " + c.shown_api() + ">"; });
  m.def("fetch", &FetchTable, py::arg("client"), py::kw_only(), py::arg("nodes"), py::arg("start"),
        py::arg("end"), py::arg("job"), py::arg("metrics"), py::arg("summary"), py::arg("progress"),
        py::arg("check_metrics") = true, py::arg("as_rate") = false,
        "Fetches a query into a Table (the GIL is released); check_metrics false: metrics no "
        "node reports are not an error; as_rate: each value as its series' rate per second, as "
        "Kwollect's as_rate=true gives it, over the whole window");
  m.def("look_up_nodes", &LookUp, py::arg("client"), py::arg("names"),
        "Checks node names against the reference API");
  m.def("resolve", &ResolveQuery, py::arg("client"), py::kw_only(), py::arg("nodes"),
        py::arg("start"), py::arg("end"), py::arg("job"),
        "Resolves a query (a job's nodes, window and types; nodes checked) without fetching");
  m.def(
      "node_fqdn", [](const std::string& name) { return Unwrap(ParseNodeName(name)).Fqdn(); },
      py::arg("name"), "The FQDN of a node name (FQDN, KaVLAN or IPv6 name, uid.site)");
}

}  // namespace kwatt::python

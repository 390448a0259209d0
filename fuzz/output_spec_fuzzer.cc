// The meter's output specs (`kwatt meter --output SPEC`): no crash; what a spec that parses shows
// holds no credentials and parses again to the same kind, path, URL and site; an HTTP URL that
// parses shows an origin that parses back to it.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "src/meter/outputs/output_spec.h"

using kwatt::meter::internal::HttpUrl;
using kwatt::meter::internal::OutputSpec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kwatt::Result<OutputSpec> spec = kwatt::meter::internal::ParseOutputSpec(text);
  if (spec.ok()) {
    kwatt::Result<OutputSpec> again = kwatt::meter::internal::ParseOutputSpec(spec->shown);
    KWATT_FUZZ_CHECK(again.ok());
    KWATT_FUZZ_CHECK(again->url.username.empty() && again->url.password.empty());
    KWATT_FUZZ_CHECK(again->kind == spec->kind && again->path == spec->path &&
                     again->database == spec->database && again->site == spec->site &&
                     again->url.Shown() == spec->url.Shown());
  } else {
    KWATT_FUZZ_CHECK(spec.status().code() == kwatt::Status::Code::kInvalidArgument);
  }
  kwatt::Result<HttpUrl> url = kwatt::meter::internal::ParseHttpUrl(text);
  if (url.ok()) {
    kwatt::Result<HttpUrl> origin = kwatt::meter::internal::ParseHttpUrl(url->Origin());
    KWATT_FUZZ_CHECK(origin.ok() && origin->host == url->host && origin->port == url->port &&
                     origin->scheme == url->scheme);
  }
  return 0;
}

// OpenOutput (kwatt/meter/outputs/outputs.h): the output an --output spec names, opened by its own
// file's opener (openers.h).
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_spec.h"

namespace kwatt::meter {

Result<std::unique_ptr<OutputSink>> OpenOutput(std::string_view text,
                                               const OutputOptions& options) {
  KWATT_ASSIGN_OR_RETURN(internal::OutputSpec spec, internal::ParseOutputSpec(text));
  switch (spec.kind) {
    case internal::OutputKind::kCsv:
    case internal::OutputKind::kJsonl:
      return internal::OpenCsvOrJsonlOutput(spec, options);
    case internal::OutputKind::kInfluxdb:
      return internal::OpenInfluxdbOutput(spec, options);
    case internal::OutputKind::kKwollect:
      return internal::OpenKwollectOutput(spec, options);
    case internal::OutputKind::kTextfile:
      return internal::OpenNodeExporterTextfileOutput(spec, options);
    case internal::OutputKind::kArchive:
      return internal::OpenArchiveOutput(spec, options);
    case internal::OutputKind::kPowerApiCsv:
    case internal::OutputKind::kPowerApiJson:
    case internal::OutputKind::kPowerApiFormulaJson:
      return internal::OpenPowerApiOutput(spec, options);
  }
  return Status::Internal("an output kind without a maker");
}

}  // namespace kwatt::meter

#include "kwatt/core/row_sink.h"

namespace kwatt {

std::string NodeName::Cluster() const {
  size_t dash = uid.rfind('-');
  return dash == std::string::npos ? uid : uid.substr(0, dash);
}

}  // namespace kwatt

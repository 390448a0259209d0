// The Kwollect client's node names: Grid'5000's, core's (kwatt/core/node_name.h), under the
// names the client's users know them by.
#ifndef KWATT_KWOLLECT_NODE_NAME_H_
#define KWATT_KWOLLECT_NODE_NAME_H_

#include "kwatt/core/node_name.h"

namespace kwatt::kwollect {

using kwatt::NodeName;
using kwatt::ParseNodeList;
using kwatt::ParseNodeName;

}  // namespace kwatt::kwollect

#endif  // KWATT_KWOLLECT_NODE_NAME_H_

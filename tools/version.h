// ferry's version, as `ferryd --version`, `ferryctl --version` and the
// installed pkg-config file print it: the one written in
// tools/python/ferry/_version.py (ferry.__version__), read from there at
// build time (//tools:version_cc).
#ifndef FERRY_TOOLS_VERSION_H_
#define FERRY_TOOLS_VERSION_H_

namespace ferry {

// "0.1": ferry.__version__.
const char* FerryVersion();

}  // namespace ferry

#endif  // FERRY_TOOLS_VERSION_H_

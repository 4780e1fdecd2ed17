// canonical/raft's header, which has no C++ linkage block of its own.
#pragma once

extern "C" {
#include <raft.h>
}

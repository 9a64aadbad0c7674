#include <sys/prctl.h>

// prctl is variadic, which Swift does not import: one fixed call per use.
static inline int keyferry_forbid_dumping(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

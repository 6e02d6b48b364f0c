/* Built as C and linked into nothing: keeps the ABI headers usable from plain C. */
#include "profiler_v5.h"
#include "tuner_v2.h"
#include "tuner_v3.h"
#include "tuner_v4.h"
#include "tuner_v7.h"

/* Helpers shared by the unit tests (each test file includes this header). */
#ifndef FE_TEST_FIXTURES_H
#define FE_TEST_FIXTURES_H

#include <criterion/criterion.h>
#include <stdio.h>

#include "backends/backend.h"
#include "engine/core/error.h"

/* The opened backend `name`, or skip the test saying why there is none. */
static inline fe_backend *test_backend_or_skip(const char *name)
{
  fe_backend *be = NULL;
  if (fe_backend_get(name, &be)) {
    char why[1024];
    snprintf(why, sizeof why, "%s", fe_error_message());
    fe_error_clear();
    cr_skip_test("%s backend unavailable: %s", name, why);
  }
  return be;
}

/* Skip a test in precision p on a device that cannot run it (double without fp64). */
static inline void test_need_precision(const fe_backend *be, fe_precision p)
{
  if (p == FE_DOUBLE && !be->info.fp64) cr_skip_test("%s has no fp64", be->info.name);
}

/* Deterministic values in [lo, hi), the i-th of a sequence chosen by seed. */
static inline double test_value(size_t i, unsigned seed, double lo, double hi)
{
  unsigned long long h = (i + 1) * 6364136223846793005ULL + seed * 1442695040888963407ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return lo + (hi - lo) * (double)(h >> 11) / 9007199254740992.0;
}

#endif

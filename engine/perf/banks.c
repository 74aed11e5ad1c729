/* felab performance: the bank counting the strategies' counts are made of. A warp's access
 * to shared memory in wavefronts (32 banks of 4 bytes, 8-byte words by half-warps), its
 * global loads' wavefronts and 128-byte lines through L1, and the mean over random
 * accesses (the bank model of docs/kernels.md). */
#include "engine/perf/perf.h"

int fe_bank_wavefronts(const long long *idx, int n, int size)
{
  /* a word read twice is sent once: repeats are looked for among the words of the same first
   * bank only (a warp's 32 against each other took 500 comparisons a call) */
  long long seen[32][32];
  int nseen[32] = {0}, per_bank[32] = {0}, most = 0, words = size / 4 > 0 ? size / 4 : 1;
  for (int t = 0; t < n && t < 32; t++) {
    if (idx[t] < 0) continue;
    const int home = (int)((idx[t] * words) & 31);
    int dup = 0;
    for (int s = 0; s < nseen[home] && !dup; s++) dup = seen[home][s] == idx[t];
    if (dup) continue;
    seen[home][nseen[home]++] = idx[t];
    for (int k = 0; k < words; k++) {
      int bank = (home + k) & 31;
      if (++per_bank[bank] > most) most = per_bank[bank];
    }
  }
  return most;
}

int fe_distinct_words(const long long *idx, int n)
{
  long long seen[32];
  int ns = 0;
  for (int t = 0; t < n && t < 32; t++) {
    int dup = idx[t] < 0;
    for (int s = 0; s < ns && !dup; s++) dup = seen[s] == idx[t];
    if (!dup) seen[ns++] = idx[t];
  }
  return ns;
}

/* The bank model for 8-byte words by half-warps of 16 items, each half its own count (4-byte
 * words: the whole warp's). */
static int half_warp_wavefronts(const long long *idx, int n, int size)
{
  if (size <= 4) return fe_bank_wavefronts(idx, n, size);
  long long half[32];
  int total = 0;
  for (int t0 = 0; t0 < n && t0 < 32; t0 += 16) {
    int m = 0;
    for (int t = t0; t < t0 + 16 && t < n; t++) half[m++] = idx[t];
    total += fe_bank_wavefronts(half, m, size);
  }
  return total;
}

int fe_bank_store_wavefronts(const long long *idx, int n, int size)
{
  return half_warp_wavefronts(idx, n, size);
}

/* A warp's global load of 8-byte words is served in two halves of 16 items (as Nsight Compute
 * counts transpose's table and factor loads in double; in single the whole warp's count). */
int fe_l1_wavefronts(const long long *idx, int n, int size)
{
  return half_warp_wavefronts(idx, n, size);
}

int fe_l1_lines(const long long *idx, int n, int size)
{
  long long line[32];
  for (int t = 0; t < n && t < 32; t++) line[t] = idx[t] < 0 ? -1 : idx[t] * size / 128;
  return fe_distinct_words(line, n);
}

double fe_bank_random_wavefronts(int size)
{
  unsigned s = 12345u;
  long long idx[32];
  double sum = 0;
  const int samples = 256;
  for (int r = 0; r < samples; r++) {
    for (int t = 0; t < 32; t++) {
      s = s * 1664525u + 1013904223u;
      idx[t] = (long long)(s >> 20); /* a random word of 4096 (the generator's high bits) */
    }
    sum += fe_bank_wavefronts(idx, 32, size);
  }
  return sum / samples;
}

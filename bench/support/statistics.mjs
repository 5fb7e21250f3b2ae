// Order statistics of samples.

/** The median: the middle sample, or the mean of the two middle ones (NaN for no samples). */
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** The `p`th percentile by nearest rank: the smallest sample at or above p % of them. */
export const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

/** The middle sample, the upper of the two middle ones for an even count (undefined for none). */
export const upperMedian = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

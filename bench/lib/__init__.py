"""Research and evaluation code used only by benchmarks and tests (never by the product): the
perplexity evaluator, the mixed exact/archived attention and its token-by-token reference, the
KIVI baseline and the attention-weighted distortion metric."""

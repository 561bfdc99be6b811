"""What is trained and saved: the bi-encoder and its pooling, the InF-Embed interaction head,
decoder-only backbones with LoRA, tokenization, and the saved-folder format with its reader.

Modules: `config` (`ModelConfig`), `bi_encoder` (`BiEncoder`), `pooling`, `interaction`
(`InstructionQueryAttention`), `decoder` (EOS, left padding, LoRA), `tokens`
(`TokenizedTexts`), `saved` (what a saved folder holds), `reranker` (the reranker contract) and
`llm_reranker` (a causal LM scoring relevance as answer log-odds), `fingerprint` (weight
hashes). Nothing here imports the training loop, evaluation or synthesis.
"""

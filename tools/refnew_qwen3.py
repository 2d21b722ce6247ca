"""transformers references for tests/test_llama.c that need a newer transformers than Debian's
torch 1.13 allows: Qwen3ForCausalLM (q/k norms; added in transformers 4.51), and configurations
as transformers 5 writes them (rope_parameters, layer_types). Run with the newest torch and
transformers (the .venv-bench venv: sh bench/setup.sh); tests/run.sh runs every tools/refnew_*.py
with it.

    .venv-bench/bin/python tools/refnew_qwen3.py OUTDIR
      ->  OUTDIR/qwen3/<model>/ and OUTDIR/qwen3.safetensors, laid out as tools/ref_llama.py's
          (the same test runs on both)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_llama  # noqa: E402
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen3Config,  # noqa: E402
                          Qwen3ForCausalLM)

MODELS = [
    ("qwen3_gqa2_hd24", Qwen3ForCausalLM, Qwen3Config,
     dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
          intermediate_size=96, num_hidden_layers=2, tie_word_embeddings=False,
          rope_theta=1000000.0), None, None),
    ("qwen3_mqa_tied_bias_window", Qwen3ForCausalLM, Qwen3Config,
     dict(hidden_size=48, num_attention_heads=6, num_key_value_heads=1, head_dim=8,
          intermediate_size=64, num_hidden_layers=3, tie_word_embeddings=True,
          attention_bias=True, use_sliding_window=True, sliding_window=5, max_window_layers=1),
     None, None),
    ("llama_v5_llama3", LlamaForCausalLM, LlamaConfig,
     dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
          num_hidden_layers=2, tie_word_embeddings=False, rope_theta=500000.0,
          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
     None, None),
]

if __name__ == "__main__":
    ref_llama.run(MODELS, sys.argv[1] if len(sys.argv) > 1 else "build/ref", "qwen3")

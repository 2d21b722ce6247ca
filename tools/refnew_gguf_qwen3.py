"""References for tests/test_gguf_models.c that need the newest transformers (Qwen3ForCausalLM,
added in transformers 4.51): tiny random Qwen3 models written as GGUF files, laid out as
tools/ref_gguf_models.py's (the same test runs on both). Run with .venv-bench (tests/run.sh runs
every tools/refnew_*.py with it). The gguf package is pure Python and lives in the project venv
(.venv); this script imports it from there.

    .venv-bench/bin/python tools/refnew_gguf_qwen3.py OUTDIR
      ->  OUTDIR/gguf_models/qwen3_*.gguf and OUTDIR/gguf_qwen3.safetensors"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import gguf  # noqa: F401
except ImportError:
    sys.path += glob.glob(os.path.join(HERE, "..", ".venv", "lib", "python3*", "site-packages"))
    import gguf  # noqa: F401,E402
import ref_gguf_models  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402


def models():
    common = dict(max_position_embeddings=64, vocab_size=97, rms_norm_eps=1e-6,
                  rope_theta=1000000.0)
    hd32 = dict(common, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                intermediate_size=96, num_hidden_layers=2, tie_word_embeddings=False)
    tied = dict(common, hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                head_dim=16, intermediate_size=64, num_hidden_layers=2, tie_word_embeddings=True)
    return [("qwen3_hd32_f32", "qwen3", Qwen3ForCausalLM, Qwen3Config(**hd32), "f32", None),
            ("qwen3_hd32_q8_0", "qwen3", Qwen3ForCausalLM, Qwen3Config(**hd32), "q8_0", None),
            ("qwen3_mqa_tied_q4_1", "qwen3", Qwen3ForCausalLM, Qwen3Config(**tied), "q4_1", None)]


if __name__ == "__main__":
    ref_gguf_models.run(models(), sys.argv[1] if len(sys.argv) > 1 else "build/ref",
                        "gguf_qwen3", 20261203)

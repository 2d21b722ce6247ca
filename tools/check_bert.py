"""Checks a BERT model directory written by attn_bert_save_dir (tests/test_bert.c): transformers
loads it with no missing or unexpected weights, and every parameter equals the one of the
original transformers-written directory it was loaded from.

usage: check_bert.py SAVED_DIR ORIGINAL_DIR"""
import sys

import torch
import transformers
from transformers import AutoConfig, BertForMaskedLM, BertModel

transformers.logging.set_verbosity_error()


def load(d):
    arch = (AutoConfig.from_pretrained(d).architectures or ["BertModel"])[0]
    cls = BertForMaskedLM if arch == "BertForMaskedLM" else BertModel
    return cls.from_pretrained(d, output_loading_info=True)


def main():
    saved, orig = sys.argv[1], sys.argv[2]
    m, info = load(saved)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        print("check_bert: transformers reports", bad)
        return 1
    ref = BertForMaskedLM.from_pretrained(orig) if isinstance(m, BertForMaskedLM) else \
        BertModel.from_pretrained(orig)
    a, b = m.state_dict(), ref.state_dict()
    for k, v in b.items():
        if k not in a:
            print("check_bert: %s missing after reload" % k)
            return 1
        if not torch.equal(a[k], v):
            print("check_bert: %s differs" % k)
            return 1
    print("check_bert: %s loads in transformers %s, %d tensors identical" %
          (saved, transformers.__version__, len(b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

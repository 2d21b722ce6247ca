/* cmd_forward_bert.h — the BERT branch of `attn forward` (src/cli/cmd_forward_bert.c). */
#ifndef ATTN_CMD_FORWARD_BERT_H
#define ATTN_CMD_FORWARD_BERT_H

/* Run the BERT directory `model` on the comma-separated ids: out (may be NULL) receives the last
 * hidden states (T, hidden_size) .npy, hidden_out (may be NULL) every layer's
 * (num_hidden_layers + 1, T, hidden_size), compare_ref (may be NULL) is checked against them.
 * Without out and compare_ref a summary is printed. Returns the exit code. */
int cmd_forward_bert(const char *model, const char *ids, const char *out, const char *hidden_out,
                     const char *compare_ref);

#endif

# Golden: tiny random BERT classifier with hidden_act "gelu_new" (tanh GELU).
# Usage: python3 tools/golden/gen_cls_bert_gelu_new.py --out tests/golden/cls_bert_gelu_new
import golden_common as gc
import cls_golden

if __name__ == "__main__":
    cls_golden.run("bert", gc.parse_out("cls_bert_gelu_new golden"), act="gelu_new")

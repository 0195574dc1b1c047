# Golden: tiny random bert sequence classifier, forward/backward and 3 AdamW steps.
# Usage: python3 tools/golden/gen_cls_bert.py --out tests/golden/cls_bert
import golden_common as gc
import cls_golden

if __name__ == "__main__":
    cls_golden.run("bert", gc.parse_out("cls_bert golden"))

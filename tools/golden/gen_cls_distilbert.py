# Golden: tiny random distilbert sequence classifier, forward/backward and 3 AdamW steps.
# Usage: python3 tools/golden/gen_cls_distilbert.py --out tests/golden/cls_distilbert
import golden_common as gc
import cls_golden

if __name__ == "__main__":
    cls_golden.run("distilbert", gc.parse_out("cls_distilbert golden"))

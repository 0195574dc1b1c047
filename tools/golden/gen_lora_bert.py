# Golden: PEFT LoRA (r=4, alpha=8, use_rslora=False) on the tiny bert classifier.
# Usage: python3 tools/golden/gen_lora_bert.py --out tests/golden/lora_bert
import golden_common as gc
import lora_golden

if __name__ == "__main__":
    lora_golden.run("bert", gc.parse_out("lora_bert golden"), rslora=False)

# Training curves (eval/plot_training.py) and its test on synthetic logs: build/test_plot_training
# runs test/test_plot_training.py with Debian's Python (matplotlib).
$(BUILD)/test_plot_training: test/test_plot_training.py eval/plot_training.py | $(BUILD)
	printf '#!/bin/sh\nexec /usr/bin/python3 test/test_plot_training.py\n' > $@
	chmod +x $@
TESTS += $(BUILD)/test_plot_training

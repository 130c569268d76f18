# doc/attention.md specifies the attention (forward, stable evaluation, backward, kernels, the
# family of variants). `make test` checks that every .md file a source, script or document names
# exists, and that every "<file>.md, section 'Name'" names one of that file's headings.
$(BUILD)/test_doc_refs: doc/check_refs.py | $(BUILD)
	cp $< $@
	chmod +x $@

TESTS += $(BUILD)/test_doc_refs

check_shared_chain "$WORKSPACE_ROOT"
check_directory "$JOB_DIR" own


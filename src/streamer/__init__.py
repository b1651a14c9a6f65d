"""The programs the import job runs on the compute node to stream an image into squashfs.

They run under the node's own python3 (3.8 and newer, the standard library only) and import
nothing else of slurm_image; the host imports them to stage them and to test them.
"""

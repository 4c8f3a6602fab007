"""`python -m jobs [--identity NAME] [--burst]`: the sending worker, without the web app."""

from jobs.worker import main

if __name__ == "__main__":
    main()

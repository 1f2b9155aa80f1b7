"""Agent campaigns: run a coding agent N times on a frozen task, each time in a fresh
workspace inside the sandbox, and judge every result the way ``lab evaluate`` does.

    task = load_task(Path("campaigns/speedup.yaml"))                  # lab.campaign.task
    outcome = execute(CampaignRequest(task_path=..., agent_cmd="sh agent.sh"), say=print)
    outcome.campaign.met, outcome.archive                             # lab.campaign.conduct

``task`` reads the task file and ``settle`` the numbers, ``workspace`` makes the agent's fresh
repository and takes its patch and bundle afterwards, ``agent`` runs the agent (and the
candidate's build) in the sandbox with its output streamed live, ``outcome`` decides each
repetition's outcome, ``model`` is the typed campaign record (``results.json`` →
``campaign``), ``records`` builds its parts, and ``conduct`` runs the whole campaign;
``lab.reports.campaign`` draws it.
"""

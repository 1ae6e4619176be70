"""Writes bench/data/conversation_eval.json: two long multi-session conversations, every
turn one memory, with questions labelled by the turns that hold their evidence.

Why: recall_eval.json's conversations are 2-3 sessions of 6-8 turns, so finding the right
turn there is easy. Issue 37 asks whether recall finds it among hundreds of turns over
months, where the same topics come back in many sessions, most turns are small talk or
near misses on the same subject, questions use other words than the turn that answers
them, and the evidence is often spread over sessions. Each conversation here has 22-24
sessions and over 400 turns; the questions are of four kinds:

- single-hop: one turn answers it;
- multi-hop: two or more turns, in different sessions, are needed together;
- temporal: "when" and "how long" questions: the answer needs the turn and its
  session's date (in each memory's `time`), or two events put in order;
- open-domain: a judgement that the conversation supports without stating it.

Everything is generated from the hand-written story beats, fillers and near-miss lines
below with a fixed seed, so the JSON is the same on every run (run once; it is
committed). Run: .venv/bin/python bench/data/make_conversation_eval.py
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

SEED = 37
MIN_TURNS = 400

Turn = tuple[str, str, str]  # (speaker, text, evidence key or "")


@dataclass
class Conversation:
    cid: str
    speakers: tuple[str, str]
    dates: list[str]  # one per session, ISO dates
    beats: dict[int, list[list[Turn]]]  # session -> story beats, each a run of turns
    questions: list[tuple[str, str, list[str], str]]  # (kind, question, keys, answer)
    near: dict[str, list[str]]  # topic -> near-miss lines either speaker may say
    small: dict[str, list[str]]  # speaker (or "*") -> small talk
    openers: dict[str, list[str]]
    closers: dict[str, list[str]]
    reactions: dict[str, list[str]]
    #: topics whose near-miss lines this conversation draws on
    topics: list[str] = field(default_factory=list)


def _b(*turns: Turn) -> list[Turn]:
    return list(turns)


# --- conversation A: two friends, Maya and Dev, March 2025 to January 2026 --------------

A_DATES = ["2025-03-02", "2025-03-16", "2025-03-30", "2025-04-12", "2025-04-27",
           "2025-05-10", "2025-05-26", "2025-06-04", "2025-06-18", "2025-07-01",
           "2025-07-15", "2025-07-30", "2025-08-13", "2025-08-27", "2025-09-10",
           "2025-09-24", "2025-10-08", "2025-10-21", "2025-11-04", "2025-11-19",
           "2025-12-03", "2025-12-17", "2026-01-07", "2026-01-21"]

M, D = "Maya", "Dev"

A_BEATS: dict[int, list[list[Turn]]] = {
    1: [_b((M, "Okay, I did it: I paid the entry fee for the Porto half marathon. It's on "
               "the 19th of October.", "run-signup"),
           (D, "Twenty-one kilometres! You've never gone further than ten, have you?", ""),
           (M, "Nope, so I have about seven months to build up to it.", "")),
        _b((D, "Work is mad, the year tens sit their chemistry mock exams next week and I'm "
               "still writing the paper.", "dev-teacher"))],
    2: [_b((D, "Big news from our side: we adopted a three-year-old greyhound from the "
               "rescue centre out in Spandau. We called him Pickle.", "dog-adopt"),
           (M, "A greyhound! Don't they need hours of exercise?", ""),
           (D, "Apparently not, they sprint for five minutes and then sleep twenty hours a "
               "day.", "dog-sleep")),
        _b((M, "I started a wheel-throwing class at the community studio on Tuesday "
               "evenings. Everything I make comes out wonky.", "pottery-start"))],
    3: [_b((M, "My manager Ines told us she's leaving Nordfrakt at the end of the month.",
            "work-ines"),
           (D, "Is that the freight company where you build the warehouse dashboards?", ""),
           (M, "Yes, I've been their data analyst for four years now, mostly forecasting "
               "truck loads in spreadsheets and SQL.", "work-analyst")),
        _b((M, "Also, my brother Felix set the date: he and Joana are getting married in "
               "Portugal in September.", "felix-engaged"))],
    4: [_b((M, "I joined a running club, the Riverside Striders. We do intervals every "
               "Thursday evening along the canal.", "run-club")),
        _b((D, "Did I tell you I play bass in a covers band now? We're called The Late "
               "Trams.", "band-bass"),
           (D, "Our first proper gig is at The Anchor on Friday, mostly nineties rock.",
            "band-gig"))],
    5: [_b((M, "I've turned the balcony into a little vegetable patch: three chilli plants, "
               "basil and some cherry tomatoes.", "garden-plant")),
        _b((D, "I'm taking thirty pupils to the Deutsches Museum in Munich in June. The "
               "permission slips alone are a nightmare.", "dev-trip"))],
    6: [_b((D, "Pickle refuses to climb the stairs to our flat, so I carry a thirty-kilo "
               "animal up to the fourth floor twice a day.", "dog-stairs")),
        _b((M, "My first bowl collapsed while it was spinning, it just folded in on itself "
               "like a wet napkin.", "pottery-collapse")),
        _b((D, "The gig went well, the landlord wants us back every first Friday of the "
               "month.", "band-regular"))],
    7: [_b((M, "Bad news: I rolled my ankle on a tree root during yesterday's long run. "
               "It's purple and twice its normal size.", "run-injury"),
           (D, "Ouch. Are you getting it looked at?", ""),
           (M, "Seeing someone on Wednesday. I'm furious, training was going so well.", ""))],
    8: [_b((M, "The physio says no running at all for three weeks, so I'm doing laps at the "
               "Stadtbad pool instead.", "run-swim")),
        _b((D, "I've been trying to make proper ramen at home. The pork bone broth has to "
               "simmer for twelve hours.", "ramen-broth"),
           (M, "Twelve hours? Your neighbours must love the smell.", ""))],
    9: [_b((M, "Guess who is the new lead of the analytics team? They gave me Ines's job.",
            "work-promo")),
        _b((D, "I sold the old Golf and bought a cargo bike instead. Pickle rides in the box "
               "at the front.", "bike-buy"))],
    10: [_b((M, "First run since the ankle: five easy kilometres and nothing hurt.",
             "run-return")),
         _b((D, "Our drummer Kai quit, he's moving to Hamburg for a job at the port.",
             "band-kai")),
         _b((M, "I made a teapot and four matching cups for Mum's sixtieth. Only one cup "
                "leaks.", "pottery-teapot"))],
    11: [_b((M, "Pigeons dug up half my chilli seedlings, so now there's a net over the whole "
                "balcony.", "garden-pigeons")),
         _b((D, "We're planning three weeks in Japan next spring, starting in Tokyo and "
                "ending wherever the trains take us.", "japan-plan"))],
    12: [_b((D, "I've applied to be head of the science department. The interview is a "
                "presentation to the governors.", "dept-apply")),
         _b((D, "Pickle started obedience lessons at the dog school on Saturdays. He's the "
                "only one who lies down for the whole hour.", "dog-class"))],
    13: [_b((M, "I hired two juniors, Oskar and Lena, both straight out of university.",
             "work-hire")),
         _b((D, "Someone cut the lock and stole the cargo bike from outside the bakery. "
                "Pickle's blanket was still in the box.", "bike-stolen"))],
    14: [_b((D, "Hosted ramen night for eight friends on Saturday. Two pots of broth gone in "
                "forty minutes.", "ramen-night")),
         _b((D, "We found a new drummer: Rosa, she teaches percussion at the music school "
                "round the corner.", "band-rosa"))],
    15: [_b((M, "Flying to Lisbon on Thursday for Felix's wedding, I still haven't written my "
                "speech.", "felix-trip")),
         _b((M, "The studio asked if I want a stall at their Christmas market to sell my "
                "mugs.", "pottery-market"))],
    16: [_b((M, "We're back from the wedding. Felix and Joana said their vows on a clifftop "
                "near Cascais, and I cried through all of it.", "felix-wedding")),
         _b((D, "The insurance paid out for the stolen bike, so there's a new one with two "
                "proper locks.", "bike-insurance"))],
    17: [_b((M, "Harvest report: forty-two chillies off the balcony. I blended them into hot "
                "sauce and filled nine little bottles.", "garden-sauce")),
         _b((D, "I got the head of department job! I start in January.", "dept-got"))],
    18: [_b((M, "I finished Porto on Sunday! One hour fifty-eight, so under two hours after "
                "all.", "run-finish"),
            (D, "That's amazing after the ankle drama.", ""))],
    19: [_b((M, "Felix and Joana are expecting a baby in the spring! I'm going to be an "
                "aunt.", "felix-baby")),
         _b((D, "Finally, Pickle goes up the stairs by himself. Took six months and a lot of "
                "cheese.", "dog-stairs-fixed"))],
    20: [_b((M, "I'm thinking about an evening master's in urban planning. Forecasting "
                "trucks is getting a bit dull.", "work-masters")),
         _b((D, "Pickle had to have two teeth out, the vet says greyhounds have terrible "
                "teeth.", "dog-teeth"))],
    21: [_b((M, "The Christmas stall was brilliant, I sold thirty mugs in one afternoon.",
             "pottery-sold")),
         _b((D, "The band is playing the school's Christmas concert, the kids think it's "
                "hilarious that their teacher has a band.", "band-school"))],
    22: [_b((D, "Flights are booked: we land in Tokyo on the 3rd of April.", "japan-flights")),
         _b((M, "I sent off my application for the planning master's at the TU.",
             "masters-apply"))],
    23: [_b((M, "New year, new madness: I've entered the Berlin marathon in September. The "
                "full distance this time.", "run-berlin")),
         _b((D, "First week as head of department and I've already had to cover three "
                "lessons.", "dept-start"))],
    24: [_b((M, "I got into the master's! Lectures start in April, two evenings a week.",
             "masters-accepted")),
         _b((D, "Rosa booked a studio, we're recording a five-song EP in February.",
             "band-ep"))],
}

A_QUESTIONS: list[tuple[str, str, list[str], str]] = [
    # single-hop
    ("single-hop", "What breed of dog did Dev take in from the shelter?", ["dog-adopt"],
     "a greyhound"),
    ("single-hop", "What is the name of Dev's pet?", ["dog-adopt"], "Pickle"),
    ("single-hop", "Which instrument does Dev play?", ["band-bass"], "bass"),
    ("single-hop", "Where did Dev's group perform their first show?", ["band-gig"],
     "The Anchor"),
    ("single-hop", "What subject does Dev teach?", ["dev-teacher"], "chemistry"),
    ("single-hop", "What does Maya do for a living?", ["work-analyst"],
     "data analyst at a freight company"),
    ("single-hop", "What is the name of the athletics group Maya trains with?",
     ["run-club"], "the Riverside Striders"),
    ("single-hop", "What is Maya growing outside her flat?", ["garden-plant"],
     "chillies, basil and cherry tomatoes"),
    ("single-hop", "What went wrong with the first thing Maya made in her ceramics course?",
     ["pottery-collapse"], "the bowl collapsed"),
    ("single-hop", "How long does Dev cook the stock for his noodle soup?", ["ramen-broth"],
     "twelve hours"),
    ("single-hop", "What present did Maya make for her mother's birthday?",
     ["pottery-teapot"], "a teapot and four cups"),
    ("single-hop", "Why did the band lose its drummer?", ["band-kai"],
     "he moved to Hamburg for a job"),
    ("single-hop", "Who plays the drums for The Late Trams now?", ["band-rosa"], "Rosa"),
    ("single-hop", "Where did Maya's brother and his bride exchange vows?",
     ["felix-wedding"], "on a clifftop near Cascais"),
    ("single-hop", "How quickly did Maya complete the race in Portugal?", ["run-finish"],
     "1:58"),
    ("single-hop", "Where is Dev taking his class on the school outing?", ["dev-trip"],
     "the Deutsches Museum in Munich"),
    ("single-hop", "Which birds attacked Maya's seedlings?", ["garden-pigeons"], "pigeons"),
    ("single-hop", "How many pieces did Maya sell at the festive fair?", ["pottery-sold"],
     "thirty mugs"),
    ("single-hop", "What did the vet have to do to Dev's dog?", ["dog-teeth"],
     "take two teeth out"),
    ("single-hop", "What is Dev's band going to record?", ["band-ep"], "a five-song EP"),
    # multi-hop
    ("multi-hop", "What happened that kept Maya from running, and what did she do for "
                  "exercise instead?", ["run-injury", "run-swim"],
     "an ankle injury; swimming"),
    ("multi-hop", "Who replaced the musician who left for Hamburg?", ["band-kai", "band-rosa"],
     "Rosa replaced Kai"),
    ("multi-hop", "What did Dev get after selling his car, and what became of it?",
     ["bike-buy", "bike-stolen"], "a cargo bike, which was stolen"),
    ("multi-hop", "Whose position did Maya step into when she was promoted?",
     ["work-ines", "work-promo"], "Ines's, her former manager"),
    ("multi-hop", "What did Maya end up making from the plants the birds went after?",
     ["garden-pigeons", "garden-sauce"], "hot sauce"),
    ("multi-hop", "Where did the relative who is about to become a father get married?",
     ["felix-baby", "felix-wedding"], "near Cascais, Portugal"),
    ("multi-hop", "How did Maya grow her team after taking over its leadership?",
     ["work-promo", "work-hire"], "she hired two juniors"),
    ("multi-hop", "What was Pickle afraid of, and how did Dev get him over it?",
     ["dog-stairs", "dog-stairs-fixed"], "stairs; six months of cheese"),
    ("multi-hop", "Which two long-distance races has Maya signed up for?",
     ["run-signup", "run-berlin"], "the Porto half marathon and the Berlin marathon"),
    ("multi-hop", "How did Dev's homemade Japanese noodles go from first attempts to "
                  "feeding a crowd?", ["ramen-broth", "ramen-night"],
     "twelve-hour broth, then a ramen night for eight"),
    ("multi-hop", "Who invited Maya to sell her work before the holidays, and how did it go?",
     ["pottery-market", "pottery-sold"], "the studio; she sold thirty mugs"),
    ("multi-hop", "What will Maya study in the evenings, and why does she want a change?",
     ["work-masters", "masters-accepted"], "urban planning; her work got dull"),
    # temporal
    ("temporal", "When did Maya hurt her foot?", ["run-injury"], "Sunday 25 May 2025"),
    ("temporal", "On what date is the race in Portugal that Maya registered for?",
     ["run-signup"], "19 October 2025"),
    ("temporal", "When did Pickle join Dev's household?", ["dog-adopt"], "March 2025"),
    ("temporal", "How long after hurting herself was Maya able to go running again?",
     ["run-injury", "run-return"], "about five weeks"),
    ("temporal", "When did Maya's brother's wedding take place?",
     ["felix-trip", "felix-wedding"], "mid-September 2025"),
    ("temporal", "When does Dev arrive in Japan?", ["japan-flights"], "3 April 2026"),
    ("temporal", "When does Dev take up the head of department role?",
     ["dept-got", "dept-start"], "January 2026"),
    ("temporal", "Which came first: the theft of Dev's bike or his promotion application?",
     ["dept-apply", "bike-stolen"], "the application (July) before the theft (August)"),
    ("temporal", "When is Felix and Joana's child due?", ["felix-baby"], "spring 2026"),
    ("temporal", "In which month did Dev take his pupils to Munich?", ["dev-trip"], "June"),
    ("temporal", "How long did it take Pickle to manage the stairs on his own?",
     ["dog-stairs", "dog-stairs-fixed"], "about six months"),
    ("temporal", "When do Maya's lectures begin?", ["masters-accepted"], "April 2026"),
    # open-domain
    ("open-domain", "Would Maya be a good person to ask for help with spreadsheets and "
                    "forecasts?", ["work-analyst"], "yes, she is a data analyst"),
    ("open-domain", "Would a home without a lift be a problem for Dev's dog?",
     ["dog-stairs", "dog-stairs-fixed"], "not any more"),
    ("open-domain", "Would Dev enjoy a cookery course in Japan?",
     ["ramen-broth", "japan-plan"], "likely: he makes ramen and plans a Japan trip"),
    ("open-domain", "Is Maya likely to enjoy a visit to a ceramics museum?",
     ["pottery-start", "pottery-teapot"], "likely: she throws pots"),
    ("open-domain", "Is Dev comfortable performing in front of an audience?",
     ["band-gig", "band-regular"], "yes, he gigs monthly"),
    ("open-domain", "Does Maya like spicy food?", ["garden-sauce"],
     "probably: she makes hot sauce"),
    ("open-domain", "Does Maya give up easily after a setback?", ["run-injury", "run-finish"],
     "no: she came back from the injury and finished"),
    ("open-domain", "Would Dev's dog make a good jogging partner for long distances?",
     ["dog-sleep"], "no: greyhounds sprint briefly and sleep"),
]

A_NEAR: dict[str, list[str]] = {
    "running": [
        "My dad ran marathons in the eighties, he still talks about his knees.",
        "The park was full of joggers this morning, I felt lazy just watching.",
        "Do you still use that app that counts your steps?",
        "I saw a documentary about people who run a hundred miles through the desert.",
        "There was a fun run for charity past our street on Sunday, lots of costumes.",
        "A colleague swears by barefoot shoes, I think he's mad.",
        "My sister tried a couch to 5k plan and gave up in week three.",
        "The sports shop near the station has a sale on trainers.",
    ],
    "dogs": [
        "The neighbour's labrador got out again and ate someone's sandwich.",
        "There's a dog show on TV and the poodles look like clouds.",
        "My aunt's terrier barks at every delivery van.",
        "Someone at work brings their spaniel in on Fridays.",
        "I nearly tripped over a dachshund on the U-Bahn today.",
        "Half the cafes around here have water bowls outside now.",
        "A friend's puppy chewed through a laptop cable last week.",
        "Do people really dress their pets up for Halloween?",
    ],
    "pottery": [
        "I bought a handmade mug at the flea market and it leaks.",
        "My grandmother had a whole shelf of painted plates.",
        "There's a glassblowing workshop in Kreuzberg, apparently it's very hot in there.",
        "Someone at work does knitting in meetings.",
        "I always wanted to try woodworking but I'd lose a finger.",
        "The museum shop had vases for three hundred euros each.",
        "My cousin paints watercolours of her cats.",
        "A craft fair in the old brewery had nothing but candles.",
    ],
    "music": [
        "Went to a jazz gig last night, the saxophonist was incredible.",
        "My neighbour practises the trumpet at seven in the morning.",
        "I can only play three chords on a guitar and one of them is wrong.",
        "That festival line-up for the summer looks terrible this year.",
        "The busker at the station plays the same four songs every day.",
        "Karaoke at the office party was a mistake.",
        "My brother-in-law collects vinyl and won't let anyone touch it.",
        "I heard a choir singing in the church by the market.",
    ],
    "school": [
        "My niece says chemistry is the most boring subject ever invented.",
        "Parent evenings sound like a special kind of torture.",
        "Our old maths teacher used to throw chalk at people.",
        "The school near us is being rebuilt, the noise is unreal.",
        "I still dream about exams I didn't revise for.",
        "Half my friends who trained as teachers work in offices now.",
        "The summer holidays here start so early this year.",
        "My nephew is doing a science fair project about slime.",
    ],
    "work": [
        "Our IT department made everyone change passwords again.",
        "Three-hour meetings should be illegal.",
        "A friend of mine is a project manager and hates every minute of it.",
        "The office coffee machine broke and productivity halved.",
        "My flatmate got a job at a start-up that sells socks by subscription.",
        "Everyone at the company party talked about layoffs.",
        "I spent all Monday fixing someone else's report.",
        "LinkedIn keeps suggesting I become a recruiter.",
    ],
    "garden": [
        "My mum's allotment is overrun with courgettes again.",
        "The house plants in the office all died over the holidays.",
        "A snail ate every single lettuce in my neighbour's raised bed.",
        "Someone left free tomato plants on the street with a sign.",
        "I killed a cactus once, which I'm told is impressive.",
        "The community garden is looking for volunteers on Saturdays.",
        "My landlord finally cut back the ivy on the courtyard wall.",
        "Sunflowers along the railway line are taller than people now.",
    ],
    "cooking": [
        "I tried to make bread once and produced a brick.",
        "That new noodle bar on the corner has a queue every night.",
        "My flatmate cooks curry so spicy the smoke alarm goes off.",
        "I watched a cooking show where they made soup out of bones and vinegar.",
        "We ordered pizza three nights in a row, no regrets.",
        "My grandmother's dumplings are still the best thing I've ever eaten.",
        "A food truck festival is coming to the old airport.",
        "I bought a wok and have used it exactly once.",
    ],
    "bikes": [
        "The bike lanes on our street are full of delivery scooters.",
        "My neighbour's e-scooter battery caught fire on the balcony.",
        "Public transport strike again on Thursday, I'll walk.",
        "A colleague cycles forty kilometres to work every day.",
        "Car-free Sunday in the city centre was lovely.",
        "Parking fines went up again, my brother is outraged.",
        "The train to Leipzig was two hours late.",
        "I keep meaning to fix the puncture on my old bike.",
    ],
    "family": [
        "My cousin's wedding had a bouncy castle for adults.",
        "We had a family dinner and nobody mentioned politics, a miracle.",
        "My parents are thinking about selling the house.",
        "A friend from school just had twins.",
        "My uncle is retiring and has no idea what to do with himself.",
        "Weddings are so expensive now, it's ridiculous.",
        "My sister keeps sending me baby photos of her friends' kids.",
        "Grandpa learned to video call and now calls every day.",
    ],
    "travel": [
        "A colleague just came back from Iceland and won't stop talking about it.",
        "Flights to anywhere nice in August cost a fortune.",
        "My parents went on a river cruise and loved it.",
        "I still haven't used the train pass I bought in spring.",
        "Someone at the gym is walking the Camino next year.",
        "Airport security took my good shampoo again.",
        "My friend moved to Vienna and says the coffee houses are worth it.",
        "We might do a weekend at the Baltic coast if it ever stops raining.",
    ],
}

A_SMALL = {
    "*": [
        "It's been raining for four days straight here.",
        "Did you watch the new season of that detective show?",
        "I slept eleven hours on Saturday, I feel like a new person.",
        "The heating in our building is broken again.",
        "Are you free for a call next week?",
        "I finally cleaned out the fridge, it was frightening.",
        "Have you read anything good lately?",
        "My phone screen cracked, I'm typing around the crack.",
        "The bakery downstairs has started doing cinnamon buns.",
        "I need a holiday from my holiday.",
        "We should do a picnic when the weather turns.",
        "My landlord finally replaced the washing machine.",
        "Honestly I've been mostly sleeping and working.",
        "I'm trying to drink less coffee, it's not going well.",
        "The U-Bahn was so packed this morning I couldn't breathe.",
        "Did you see the storm on Tuesday? A tree came down on our street.",
        "I started a puzzle with a thousand pieces and regret it.",
        "Saw the funniest meme today, I'll send it later.",
        "The noise from the building site starts at six every morning.",
        "My plants are the only things thriving in this flat.",
        "I bought a new duvet and it changed my life.",
        "Anything exciting planned for the weekend?",
        "I have a cold, so everything I say sounds like a foghorn.",
        "We went to the flea market and came home with a lamp nobody needs.",
        "I keep forgetting to reply to messages, sorry.",
        "Tax forms this year are a special kind of puzzle.",
        "I made it to the gym once, which I'm counting as a habit.",
        "The new neighbours seem nice, they brought biscuits.",
        "Such a long week.",
        "Ha, that's so typical.",
        "Fair enough.",
        "Sounds like a plan.",
    ],
}

A_OPENERS = {"*": ["Hey, how's things?", "Morning! Got a minute?", "Hiya, long time!",
                   "Hey you, how was your week?", "Hi! Catch-up time?",
                   "Evening! Are you around?", "Hello hello.", "Hey, quick update."]}
A_CLOSERS = {"*": ["Right, I need to run, talk soon!", "Speak next week?",
                   "Okay, off to make dinner. Bye!", "Good chatting, take care.",
                   "Let's catch up again soon.", "Night night!", "Byeee.",
                   "Talk later, say hi to everyone."]}
A_REACTIONS = {"*": ["No way!", "Wow, I did not see that coming.", "Tell me more.",
                     "How do you feel about it?", "Keep me posted.", "Oh, interesting.",
                     "Ha, of course.", "That's a lot.", "Wait, really?", "Go on then."]}

# --- conversation B: Priya and her assistant, January to October 2025 -------------------

B_DATES = ["2025-01-08", "2025-01-20", "2025-02-02", "2025-02-14", "2025-02-27",
           "2025-03-12", "2025-03-25", "2025-04-08", "2025-04-21", "2025-05-05",
           "2025-05-19", "2025-06-02", "2025-06-16", "2025-06-30", "2025-07-14",
           "2025-07-28", "2025-08-11", "2025-08-25", "2025-09-08", "2025-09-22",
           "2025-10-06", "2025-10-20"]

P, AS = "Priya", "Assistant"

B_BEATS: dict[int, list[list[Turn]]] = {
    1: [_b((P, "I want to start selling sourdough at the Saturday farmers' market in "
               "Kirchberg, alongside my normal job.", "bakery-idea"),
           (AS, "That's a lovely idea. How many loaves could you bake in one go?", ""),
           (P, "My home oven fits four at a time, so maybe twenty to thirty a morning.", "")),
        _b((P, "During the week I'm a backend engineer at an insurance company, mostly "
               "Postgres and Python.", "job"))],
    2: [_b((P, "We bought an old farmhouse last year and the kitchen is falling apart. I "
               "want to gut it this spring.", "reno-farmhouse"),
           (AS, "Do you have a builder in mind?", ""),
           (P, "Not yet, I'm collecting quotes.", ""))],
    3: [_b((P, "I've settled on a name for the bread stall: Second Rise.", "bakery-name")),
        _b((P, "I stopped the language app and found a tutor, Lucía, for Spanish on "
               "Wednesday evenings.", "spanish-tutor"))],
    4: [_b((P, "My dad had a small stroke on Tuesday night. He's in the hospital in "
               "Rosenheim, they say it was mild.", "dad-stroke"),
           (AS, "I'm so sorry, Priya. How are you holding up?", ""),
           (P, "Shaky. He can talk normally, but his left hand is weak.", "dad-hand"))],
    5: [_b((P, "The builder, Bogdan, quoted 18,500 euros for the whole kitchen.",
            "reno-quote")),
        _b((P, "I submitted a talk about zero-downtime schema migrations to the developer "
               "conference in Ghent this July.", "talk-submit"))],
    6: [_b((P, "I passed the food hygiene certificate, so I'm allowed to sell baked goods "
               "now.", "bakery-hygiene")),
        _b((P, "We got four brown hens from a farm up the valley. The kids named them "
               "after the Beatles.", "hens-get"))],
    7: [_b((P, "Dad moved from the hospital to a rehab clinic in Bad Aibling. Physio every "
               "morning, speech therapy in the afternoon.", "dad-rehab"))],
    8: [_b((P, "Bad news from the building work: the joists under the kitchen floor are "
               "rotten. That's another 3,000 euros.", "reno-joists"),
           (AS, "Better to find it now than after the new floor goes down.", ""))],
    9: [_b((P, "First market day done! I was up at half three shaping dough and all thirty "
               "loaves were gone by ten.", "bakery-first")),
        _b((P, "And the Ghent talk got accepted!", "talk-accepted"))],
    10: [_b((P, "I sat the B1 Spanish exam on Saturday. The listening part was brutal.",
             "spanish-exam"))],
    11: [_b((P, "A fox got into the coop on Monday night and took Ringo.", "hens-fox"),
            (AS, "Oh no. Are the other three all right?", ""),
            (P, "Shaken, but fine.", "")),
         _b((P, "Dad is home again and walks to the bakery with a cane.", "dad-cane"))],
    12: [_b((P, "The kitchen is finished: sage-green tiles and an oak worktop. I keep "
                "walking in just to look at it.", "reno-done")),
         _b((P, "I passed the B1 exam with 78 points!", "spanish-pass"))],
    13: [_b((P, "Did a practice run of the conference talk for my team. It ran ten minutes "
                "over and my hands were shaking.", "talk-rehearse"))],
    14: [_b((P, "The Tin Cup café in town wants twelve loaves every week.", "bakery-cafe")),
         _b((P, "We built a proper run for the hens with wire buried half a metre down.",
             "hens-run"))],
    15: [_b((P, "Back from Ghent. About two hundred people came, and the questions were all "
                "about rolling back a failed migration.", "talk-given"))],
    16: [_b((P, "Dad drove the car again for the first time, just to the garden centre and "
                "back.", "dad-drive"))],
    17: [_b((P, "There's a damp patch spreading on the cellar wall. We've put a dehumidifier "
                "down there for now.", "reno-damp"))],
    18: [_b((P, "I'm planning a month in Valencia in October to practise Spanish. Work says I "
                "can do it remotely.", "valencia-plan"))],
    19: [_b((P, "I bought a second-hand deck oven for 2,400 euros. It fits twelve loaves at "
                "once.", "bakery-oven"))],
    20: [_b((P, "The hens lay about three eggs a day now, so I've started using them in "
                "brioche for the stall.", "hens-eggs"))],
    21: [_b((P, "Dad's seventieth was at the lake house on Sunday, forty people and he gave "
                "a speech.", "dad-70"))],
    22: [_b((P, "I'm in Valencia! Language school every morning, and Lucía told me to try "
                "the horchata at a place near the central market.", "valencia-cafe"))],
}

B_QUESTIONS: list[tuple[str, str, list[str], str]] = [
    # single-hop
    ("single-hop", "What does Priya want to sell on weekends?", ["bakery-idea"],
     "sourdough at the farmers' market"),
    ("single-hop", "What name did Priya give her bread business?", ["bakery-name"],
     "Second Rise"),
    ("single-hop", "Who gives Priya her language lessons?", ["spanish-tutor"], "Lucía"),
    ("single-hop", "How much did the contractor estimate for the new kitchen?",
     ["reno-quote"], "18,500 euros"),
    ("single-hop", "What structural problem turned up during the building work?",
     ["reno-joists"], "rotten joists under the floor"),
    ("single-hop", "What colour did Priya choose for the kitchen walls' tiling?",
     ["reno-done"], "sage green"),
    ("single-hop", "In which city is the tech event where Priya applied to present?",
     ["talk-submit"], "Ghent"),
    ("single-hop", "What animal killed one of Priya's chickens?", ["hens-fox"], "a fox"),
    ("single-hop", "Which coffee shop orders bread from Priya?", ["bakery-cafe"],
     "the Tin Cup"),
    ("single-hop", "How much did Priya pay for her professional baking equipment?",
     ["bakery-oven"], "2,400 euros"),
    ("single-hop", "Where did Priya's father recover after leaving hospital?",
     ["dad-rehab"], "a rehab clinic in Bad Aibling"),
    ("single-hop", "What walking aid does Priya's father use?", ["dad-cane"], "a cane"),
    ("single-hop", "What was Priya's mark in the language test?", ["spanish-pass"],
     "78 points"),
    ("single-hop", "What was Priya's presentation about?", ["talk-submit"],
     "zero-downtime schema migrations"),
    ("single-hop", "What is Priya's day job?", ["job"], "backend engineer at an insurer"),
    ("single-hop", "Where was the party for Priya's father's birthday?", ["dad-70"],
     "the lake house"),
    ("single-hop", "What is wrong in Priya's basement?", ["reno-damp"], "a damp patch"),
    ("single-hop", "What did the audience ask about after Priya's presentation?",
     ["talk-given"], "rolling back a failed migration"),
    ("single-hop", "Which of Priya's father's limbs was affected?", ["dad-hand"],
     "his left hand"),
    # multi-hop
    ("multi-hop", "How much will the kitchen cost in total, including the surprise repair?",
     ["reno-quote", "reno-joists"], "21,500 euros"),
    ("multi-hop", "What did Priya do to protect her birds after losing one?",
     ["hens-fox", "hens-run"], "built a run with buried wire"),
    ("multi-hop", "How do the chickens Priya got in March help her market stall?",
     ["hens-get", "hens-eggs"], "their eggs go into brioche"),
    ("multi-hop", "Where did Priya's father go after the hospital, and how well does he get "
                  "around now?", ["dad-rehab", "dad-cane", "dad-drive"],
     "rehab in Bad Aibling; walks with a cane and drives again"),
    ("multi-hop", "Was Priya's conference proposal successful, and how did the presentation "
                  "go?", ["talk-accepted", "talk-given"],
     "accepted; about two hundred people came"),
    ("multi-hop", "What recommendation did Priya's tutor give her for her stay abroad?",
     ["spanish-tutor", "valencia-cafe"], "horchata near the central market"),
    ("multi-hop", "What did Priya buy after a café started taking regular orders?",
     ["bakery-cafe", "bakery-oven"], "a deck oven"),
    ("multi-hop", "What problems has the old farmhouse had?", ["reno-joists", "reno-damp"],
     "rotten joists and a damp cellar"),
    ("multi-hop", "What permit did Priya need before her first market, and how did that "
                  "day go?", ["bakery-hygiene", "bakery-first"],
     "food hygiene certificate; sold out by ten"),
    ("multi-hop", "How many hens does Priya have left?", ["hens-get", "hens-fox"], "three"),
    ("multi-hop", "How did Priya's baking capacity change from the start to the autumn?",
     ["bakery-idea", "bakery-oven"], "four loaves at a time, then twelve"),
    # temporal
    ("temporal", "When did Priya's father have his stroke?", ["dad-stroke"],
     "Tuesday 11 February 2025"),
    ("temporal", "When was Priya's first day selling at the market?", ["bakery-first"],
     "April 2025"),
    ("temporal", "When did Priya sit her Spanish test?", ["spanish-exam"], "3 May 2025"),
    ("temporal", "When did the fox attack happen?", ["hens-fox"], "Monday 12 May 2025"),
    ("temporal", "When did Priya's father get behind the wheel again?", ["dad-drive"],
     "late July 2025"),
    ("temporal", "How long after his stroke did Priya's dad drive again?",
     ["dad-stroke", "dad-drive"], "about five and a half months"),
    ("temporal", "When is Priya going to Spain?", ["valencia-plan"], "October 2025"),
    ("temporal", "When was the kitchen completed?", ["reno-done"], "early June 2025"),
    ("temporal", "When did Priya start her Spanish lessons with a teacher?",
     ["spanish-tutor"], "early February 2025"),
    ("temporal", "Which came first: buying the oven or the café's weekly order?",
     ["bakery-cafe", "bakery-oven"], "the café order"),
    ("temporal", "In which month did Priya speak at the conference?",
     ["talk-submit", "talk-given"], "July"),
    ("temporal", "When did Priya's father turn seventy?", ["dad-70"], "early October 2025"),
    # open-domain
    ("open-domain", "Could Priya help a friend with a database problem?",
     ["job", "talk-submit"], "yes, she works with Postgres"),
    ("open-domain", "Could Priya order lunch in Spanish without help?",
     ["spanish-pass"], "probably: she passed B1"),
    ("open-domain", "Is Priya an early riser?", ["bakery-first"],
     "on market days: up at half three"),
    ("open-domain", "Could Priya's father travel to a family celebration by now?",
     ["dad-drive", "dad-70"], "yes: he drives and gave a speech at his party"),
    ("open-domain", "Does Priya live in a city apartment or in the countryside?",
     ["reno-farmhouse", "hens-get"], "the countryside: a farmhouse with hens"),
    ("open-domain", "Does Priya get nervous about speaking in public?", ["talk-rehearse"],
     "yes, her hands shook"),
]

B_NEAR: dict[str, list[str]] = {
    "bread": [
        "A sourdough starter likes being fed at the same time every day.",
        "Rye flour ferments faster than wheat, so keep an eye on it.",
        "The supermarket near us started selling 'artisan' bread that tastes of cardboard.",
        "Steam in the first twenty minutes gives the crust its shine.",
        "My neighbour sells jam at the market, she's there every week.",
        "Farmers' markets usually charge a small fee per stall.",
        "A proving basket lined with linen stops the dough from sticking.",
        "Croissants take three days if you do them properly.",
    ],
    "house": [
        "Old houses often have lead pipes, worth checking.",
        "Underfloor heating is lovely but expensive to retrofit.",
        "Tiling prices vary a lot between suppliers.",
        "Some builders ask for a third of the price up front.",
        "Our neighbours are having their roof redone, the scaffolding has been up for months.",
        "Lime plaster lets old walls breathe better than gypsum.",
        "An energy certificate is needed if you ever sell.",
        "Kitchen showrooms always make everything look bigger than it is.",
    ],
    "health": [
        "Blood pressure checks are free at most pharmacies.",
        "A neighbour of ours had a hip replacement and was walking within a week.",
        "Hospital parking costs a fortune.",
        "Rehab plans usually set small goals week by week.",
        "My aunt swears by her fitness tracker's sleep score.",
        "Waiting rooms are always freezing.",
        "Grandparents tend to ignore doctors' advice about salt.",
        "The health insurance letter was four pages long.",
    ],
    "language": [
        "Listening is usually the hardest part of learning a language.",
        "Podcasts for learners speak slowly, which helps at the start.",
        "My colleague learned Italian from watching football commentary.",
        "Flashcard apps work best in short daily sessions.",
        "Subjunctives trip up almost every learner.",
        "Tandem partners swap half an hour in each language.",
        "Accents differ a lot between Spain and Latin America.",
        "My French is stuck at ordering croissants.",
    ],
    "tech": [
        "The on-call rota at work is a mess this month.",
        "We migrated our CI to a new provider and everything broke for a day.",
        "Call for papers deadlines are always a week before you're ready.",
        "A meetup in Munich is looking for speakers on observability.",
        "Our team lead wants everyone to write design docs now.",
        "Conference badges are always the wrong size for the lanyard.",
        "Slides with too much code put people to sleep.",
        "A colleague's talk got rejected three times before it was accepted.",
    ],
    "animals": [
        "Foxes are very clever about finding gaps in fences.",
        "Hens go off laying when the days get shorter.",
        "Our neighbour's goat escaped and ate the roses.",
        "Ducks are messier than chickens, apparently.",
        "The kids want a rabbit now as well.",
        "A buzzard has been circling over the field all week.",
        "Chickens love scratching through a compost heap.",
        "The vet in the village also treats horses.",
    ],
    "travel": [
        "Trains across France are cheap if you book early.",
        "My cousin spent a summer in Seville and came back with a tan and a guitar.",
        "Co-working spaces often sell day passes.",
        "Flights in October are much cheaper than in August.",
        "A friend did a language course in Málaga last year.",
        "Renting a flat for a month can be cheaper than a hotel for two weeks.",
        "Spanish dinners start very late, around ten.",
        "Remember to check the roaming charges before you go.",
    ],
}

B_SMALL = {
    P: [
        "It's snowing again up here.", "The kids have a school trip tomorrow.",
        "I'm so tired this week.", "Can you remind me to call the bank on Monday?",
        "I need a birthday present idea for my sister.", "Work was quiet today for once.",
        "We had pancakes for dinner, don't judge.", "The road to town is closed for repairs.",
        "My laptop battery is dying fast.", "I forgot my umbrella again.",
        "Netflix recommendations are getting worse.", "The village fair is next weekend.",
        "I should really sort out my email inbox.", "Our internet was down all morning.",
        "I'm trying to read more before bed.", "My sister is visiting next month.",
        "Can you add oat milk to the shopping list?",
        "Remind me to renew the car insurance.", "What a week.",
        "Thanks, that helps.", "Okay, good to know.", "Let's park that for now.",
    ],
    AS: [
        "Of course. Anything else you'd like me to keep track of?",
        "Noted, I'll remind you on Monday morning.",
        "Would you like a short list of options?",
        "That sounds like a busy week. Want me to sort your to-do list?",
        "I've added that to your shopping list.",
        "Happy to help. What would you like to start with?",
        "Got it. Shall I set a reminder?",
        "I can draft that email for you if you like.",
        "Sure, I'll keep that in mind.",
        "Here's a thought: block an hour on Friday for admin.",
        "Do you want me to summarise the options?",
        "Understood.",
        "Let me know if you want to come back to it later.",
        "I've saved that for you.",
        "That's worth writing down, I've noted it.",
        "Would a checklist help?",
    ],
}

B_OPENERS = {P: ["Hi again.", "Morning! Quick catch-up?", "Hey, got a few updates.",
                 "Hello, it's me again.", "Evening. Do you have a minute?"],
             AS: ["Welcome back, Priya. What's new?", "Hi Priya, good to hear from you.",
                  "Hello! What would you like to talk about today?",
                  "Hi! I'm here, go ahead."]}
B_CLOSERS = {P: ["That's all for today, thanks.", "Okay, I'll talk to you next week.",
                 "Thanks, bye for now.", "Right, back to work."],
             AS: ["Take care, Priya. Talk soon.", "Good luck with everything this week.",
                  "I'll keep all that in mind. Bye for now!",
                  "Anytime. Have a good evening."]}
B_REACTIONS = {AS: ["Noted, I'll remember that.", "Thanks for the update.",
                    "That's good to hear.", "Got it.", "Understood, I've saved that.",
                    "Interesting. Want me to do anything with that?",
                    "Oh! How do you feel about it?"],
               P: ["Thanks.", "Yes, exactly.", "Good point.", "I'll think about it."]}


CONVERSATIONS = [
    Conversation("c-maya-dev", (M, D), A_DATES, A_BEATS, A_QUESTIONS, A_NEAR, A_SMALL,
                 A_OPENERS, A_CLOSERS, A_REACTIONS, topics=sorted(A_NEAR)),
    Conversation("c-priya-assistant", (P, AS), B_DATES, B_BEATS, B_QUESTIONS, B_NEAR,
                 B_SMALL, B_OPENERS, B_CLOSERS, B_REACTIONS, topics=sorted(B_NEAR)),
]


class _Pool:
    """Lines drawn without repeats until a pool runs dry, then reshuffled: fillers vary."""

    def __init__(self, rng: random.Random, lines: list[str]) -> None:
        self.rng, self.lines = rng, list(lines)
        self.left: list[str] = []

    def draw(self) -> str:
        if not self.left:
            self.left = list(self.lines)
            self.rng.shuffle(self.left)
        return self.left.pop()


def _pools(rng: random.Random, table: dict[str, list[str]]) -> dict[str, _Pool]:
    return {key: _Pool(rng, lines) for key, lines in table.items()}


def _line(pools: dict[str, _Pool], speaker: str) -> str:
    return (pools.get(speaker) or pools["*"]).draw()


def build(conv: Conversation, rng: random.Random) -> tuple[list[dict], dict[str, str]]:
    """The conversation's turns as memories, and each evidence key's turn id."""
    near = _pools(rng, conv.near)
    small, openers = _pools(rng, conv.small), _pools(rng, conv.openers)
    closers, reactions = _pools(rng, conv.closers), _pools(rng, conv.reactions)
    a, b = conv.speakers
    memories: list[dict] = []
    where: dict[str, str] = {}
    for session, date in enumerate(conv.dates, start=1):
        beats = conv.beats.get(session, [])
        # blocks: a beat (its turns, then maybe a reaction) or a filler placeholder
        blocks: list[list[Turn] | str] = []
        for beat in beats:
            blocks.append(list(beat))
        size = sum(len(beat) for beat in beats)
        target = rng.randint(18, 22)
        while size + 4 + sum(isinstance(x, str) for x in blocks) < target:
            kind = rng.choice(conv.topics) if rng.random() < 0.55 else "small"
            blocks.insert(rng.randint(0, len(blocks)), kind)
        first = rng.choice((a, b))
        turns: list[Turn] = [(first, _line(openers, first), "")]
        second = b if first == a else a
        turns.append((second, _line(openers, second), ""))
        for block in blocks:
            last = turns[-1][0]
            other = b if last == a else a
            if isinstance(block, str):
                text = _line(small, other) if block == "small" else near[block].draw()
                turns.append((other, text, ""))
                continue
            turns.extend(block)
            if rng.random() < 0.6:
                speaker = b if block[-1][0] == a else a
                turns.append((speaker, _line(reactions, speaker), ""))
        last = turns[-1][0]
        other = b if last == a else a
        turns.append((other, _line(closers, other), ""))
        turns.append((last, _line(closers, last), ""))
        for i, (speaker, text, key) in enumerate(turns):
            mid = f"{conv.cid}/s{session:02d}/t{i:02d}"
            if key:
                assert key not in where, key
                where[key] = mid
            memories.append({"id": mid, "domain": "conversations",
                             "content": f"{speaker}: {text}",
                             "tags": [conv.cid, f"session-{session}"], "time": date})
    return memories, where


def make() -> dict:
    """The whole set, as written to conversation_eval.json."""
    rng = random.Random(SEED)
    memories: list[dict] = []
    queries: list[dict] = []
    summary = []
    for conv in CONVERSATIONS:
        turns, where = build(conv, rng)
        assert len(turns) >= MIN_TURNS, (conv.cid, len(turns))
        assert len(conv.dates) >= 20
        memories += turns
        for kind, question, keys, answer in conv.questions:
            missing = [k for k in keys if k not in where]
            assert not missing, missing
            queries.append({"q": question, "kind": kind, "conversation": conv.cid,
                            "relevant": [where[k] for k in keys], "answer": answer})
        summary.append({"id": conv.cid, "speakers": list(conv.speakers),
                        "sessions": [{"session": i, "date": d, "turns": sum(
                            m["id"].startswith(f"{conv.cid}/s{i:02d}/") for m in turns)}
                            for i, d in enumerate(conv.dates, start=1)],
                        "turns": len(turns)})
    return {"about": "bench/data/make_conversation_eval.py writes this file; do not edit",
            "conversations": summary, "memories": memories, "queries": queries}


def main() -> None:
    out = make()
    memories, queries, summary = out["memories"], out["queries"], out["conversations"]
    path = Path(__file__).with_name("conversation_eval.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    kinds: dict[str, int] = {}
    for q in queries:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    sizes = ", ".join(f"{c['id']}: {c['turns']} turns" for c in summary)
    print(f"{len(memories)} memories ({sizes}), {len(queries)} queries {kinds} -> {path}")


if __name__ == "__main__":
    main()
